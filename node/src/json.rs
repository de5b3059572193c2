//! JSON bodies assembled from parts built earlier: lists whose items' JSON is kept between reads (message
//! pages, the session list) are joined here rather than serialised again.

use bytes::Bytes;

/// The JSON array of `parts` (each one item's JSON): the same bytes as serialising the items as a list.
pub(crate) fn json_array(parts: &[Bytes]) -> Bytes {
    let len = parts.iter().map(Bytes::len).sum::<usize>() + parts.len() + 2;
    let mut out = Vec::with_capacity(len);
    out.push(b'[');
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(part);
    }
    out.push(b']');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_array_is_what_serialising_the_list_gives() {
        let parts = [
            Bytes::from_static(b"{\"a\":1}"),
            Bytes::from_static(b"{\"b\":2}"),
        ];
        assert_eq!(&json_array(&parts)[..], b"[{\"a\":1},{\"b\":2}]");
        assert_eq!(&json_array(&[])[..], b"[]");
    }
}
