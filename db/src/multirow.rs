//! Multi-row statements in a few fixed sizes, with the placeholder spelling each backend binds fastest. Used
//! by the stores that write a batch of rows inside one [`DataTx`] (messages, outbox rows).

use crate::DataTx;

/// Row counts a multi-row statement is prepared for. A batch of any size is written as a few statements of these
/// sizes (largest first), so a connection caches a handful of statement texts instead of one per batch size.
/// Each statement is a round trip to the connection (on SQLite, to its worker thread), so a batch of n rows
/// costs about log(n) of them instead of n.
const ROW_CHUNKS: [usize; 4] = [64, 16, 4, 1];

/// The multi-row texts of one statement, one per [`ROW_CHUNKS`] size and backend, built once.
pub struct MultiRow {
    postgres: [String; ROW_CHUNKS.len()],
    /// The same texts with anonymous `?` placeholders: SQLite resolves a `$n` parameter's name by walking a
    /// list of every named parameter, and sqlx asks for the name of each one while binding, so a statement
    /// of a thousand `$n` parameters cost half a million list steps (14% of the node's CPU in a webhook
    /// storm) where `?` costs none.
    sqlite: [String; ROW_CHUNKS.len()],
}

impl MultiRow {
    /// `head` + `rows` tuples + `tail`; `tuple(first)` writes one row's tuple whose placeholders start at
    /// `$first` (`$1`-based, `per_row` of them, each used once and in order, so that SQLite's text can use `?`).
    pub fn new(head: &str, per_row: usize, tuple: fn(usize) -> String, tail: &str) -> MultiRow {
        let postgres = ROW_CHUNKS.map(|rows| {
            let tuples: Vec<String> = (0..rows).map(|i| tuple(1 + i * per_row)).collect();
            format!("{head} {} {tail}", tuples.join(", "))
        });
        let sqlite = postgres
            .clone()
            .map(|text| anonymous_placeholders(&text).unwrap_or(text));
        MultiRow { postgres, sqlite }
    }

    /// Splits `items` into chunks of the prepared sizes, each with its statement text for `tx`'s backend.
    pub fn chunks<'a, T>(
        &'static self,
        tx: &DataTx,
        mut items: &'a [T],
    ) -> impl Iterator<Item = (&'static str, &'a [T])> + use<'a, T> {
        let texts = match tx {
            DataTx::Sqlite(..) => &self.sqlite,
            DataTx::Postgres(_) => &self.postgres,
        };
        std::iter::from_fn(move || {
            let (i, size) = ROW_CHUNKS
                .iter()
                .enumerate()
                .find(|(_, size)| **size <= items.len())?;
            let (chunk, rest) = items.split_at(*size);
            items = rest;
            Some((texts[i].as_str(), chunk))
        })
    }
}

/// `sql` with every `$n` replaced by `?`, when its placeholders are `$1, $2, ...` each once and in order
/// (then binding by position means the same); `None` otherwise. Statements here hold no `$` in literals.
fn anonymous_placeholders(sql: &str) -> Option<String> {
    let mut out = String::with_capacity(sql.len());
    let mut expected = 1usize;
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits = rest[at + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len() - at - 1);
        let number: usize = rest[at + 1..at + 1 + digits].parse().ok()?;
        if number != expected {
            return None;
        }
        expected += 1;
        out.push('?');
        rest = &rest[at + 1 + digits..];
    }
    out.push_str(rest);
    Some(out)
}

/// `($first, $first+1, ..., $first+n-1)`.
pub fn placeholders(first: usize, n: usize) -> String {
    let list: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
    format!("({})", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::anonymous_placeholders as anon;

    #[test]
    fn sqlite_texts_use_anonymous_placeholders_only_when_positions_match() {
        assert_eq!(
            anon("INSERT INTO t VALUES ($1, $2), ($3, $4)").as_deref(),
            Some("INSERT INTO t VALUES (?, ?), (?, ?)")
        );
        assert_eq!(anon("UPDATE t SET a = $1 WHERE id = $10").as_deref(), None);
        assert_eq!(anon("SELECT $1, $1").as_deref(), None);
        assert_eq!(anon("SELECT 1").as_deref(), Some("SELECT 1"));
        assert_eq!(anon("SELECT $").as_deref(), None);
    }
}
