//! Byte encoding of an app-state collection's index->value map (`HashState::index_value_map`), stored in
//! one BLOB per collection. A collection holds thousands of entries and is rewritten on every version,
//! so it is a compact length-prefixed layout rather than JSON (which spells each byte as a number):
//! `[format 1] [count u32] ([key len u32] [key utf-8] [value len u32] [value])*`, little-endian.

use std::collections::HashMap;

const FORMAT: u8 = 1;

pub(super) fn encode_index_values(map: &HashMap<String, Vec<u8>>) -> Result<Vec<u8>, String> {
    let size: usize = map.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
    let mut out = Vec::with_capacity(5 + size);
    out.push(FORMAT);
    out.extend_from_slice(&len_u32(map.len())?.to_le_bytes());
    for (key, value) in map {
        out.extend_from_slice(&len_u32(key.len())?.to_le_bytes());
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&len_u32(value.len())?.to_le_bytes());
        out.extend_from_slice(value);
    }
    Ok(out)
}

pub(super) fn decode_index_values(bytes: &[u8]) -> Result<HashMap<String, Vec<u8>>, String> {
    let mut reader = Reader { bytes, pos: 0 };
    let format = reader.take(1)?[0];
    if format != FORMAT {
        return Err(format!("unknown index map format {format}"));
    }
    let count = reader.u32()? as usize;
    // Every entry takes at least 8 bytes: a count beyond that is corruption, not a reason to allocate.
    if count > bytes.len() / 8 {
        return Err(format!(
            "index map claims {count} entries in {} bytes",
            bytes.len()
        ));
    }
    let mut map = HashMap::with_capacity(count);
    for _ in 0..count {
        let key_len = reader.u32()? as usize;
        let key = std::str::from_utf8(reader.take(key_len)?)
            .map_err(|e| format!("index map key is not UTF-8: {e}"))?
            .to_string();
        let value_len = reader.u32()? as usize;
        let value = reader.take(value_len)?.to_vec();
        map.insert(key, value);
    }
    if reader.pos != bytes.len() {
        return Err(format!(
            "{} trailing bytes after the index map",
            bytes.len() - reader.pos
        ));
    }
    Ok(map)
}

fn len_u32(len: usize) -> Result<u32, String> {
    u32::try_from(len).map_err(|_| format!("index map length {len} exceeds u32"))
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| format!("index map truncated at byte {}", self.pos))?;
        let slice = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let raw = self.take(4)?;
        let mut buf = [0u8; 4];
        buf.copy_from_slice(raw);
        Ok(u32::from_le_bytes(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_corruption() {
        let mut map = HashMap::new();
        map.insert("a2V5MQ==".to_string(), vec![1, 2, 3]);
        map.insert(String::new(), Vec::new());
        map.insert("ünïcode".to_string(), vec![0xff; 32]);
        let bytes = encode_index_values(&map).expect("encode");
        assert_eq!(decode_index_values(&bytes).expect("decode"), map);
        assert_eq!(
            decode_index_values(&encode_index_values(&HashMap::new()).expect("encode empty"))
                .expect("decode empty"),
            HashMap::new()
        );
        assert!(
            decode_index_values(&bytes[..bytes.len() - 1]).is_err(),
            "truncated"
        );
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(decode_index_values(&trailing).is_err(), "trailing bytes");
        assert!(
            decode_index_values(&[2, 0, 0, 0, 0]).is_err(),
            "unknown format"
        );
        assert!(
            decode_index_values(&[1, 255, 255, 255, 255]).is_err(),
            "absurd count"
        );
        assert!(decode_index_values(&[]).is_err(), "empty input");
    }
}
