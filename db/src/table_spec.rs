//! How the data export describes a table: its key in the export's `tables`, its SQL name, its columns (name,
//! kind, what an import binds when a row lacks the key) and a stable row order. Pure description: each
//! table's owner declares its own (the node for its tables, an engine for a table it owns that the spec's
//! export covers), and the node's data administration builds the statements from it.

/// How a column is read and bound. `Json` columns hold JSON text; the export shows them as JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Int,
    Bool,
    Json,
}

#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    pub kind: Kind,
    /// JSON text of the value bound when an imported row lacks the key (the column's DB default).
    pub fallback: Option<&'static str>,
}

/// One exported table.
#[derive(Debug)]
pub struct TableSpec {
    pub key: &'static str,
    pub name: &'static str,
    pub columns: &'static [Column],
    pub order_by: &'static str,
}

impl TableSpec {
    /// The export's keys of the columns: `snake_case` names in camelCase.
    pub fn column_keys(&self) -> Vec<String> {
        self.columns.iter().map(|c| camel_case(c.name)).collect()
    }
}

const fn column(name: &'static str, kind: Kind, fallback: Option<&'static str>) -> Column {
    Column {
        name,
        kind,
        fallback,
    }
}

pub const fn text(name: &'static str) -> Column {
    column(name, Kind::Text, None)
}
pub const fn text_or(name: &'static str, fallback: &'static str) -> Column {
    column(name, Kind::Text, Some(fallback))
}
pub const fn int(name: &'static str) -> Column {
    column(name, Kind::Int, None)
}
pub const fn int_or(name: &'static str, fallback: &'static str) -> Column {
    column(name, Kind::Int, Some(fallback))
}
pub const fn flag(name: &'static str, fallback: &'static str) -> Column {
    column(name, Kind::Bool, Some(fallback))
}
pub const fn json(name: &'static str) -> Column {
    column(name, Kind::Json, None)
}
pub const fn json_or(name: &'static str, fallback: &'static str) -> Column {
    column(name, Kind::Json, Some(fallback))
}

/// `last_triggered_at` -> `lastTriggeredAt`.
pub fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for ch in name.chars() {
        if ch == '_' {
            upper = true;
        } else if upper {
            out.extend(ch.to_uppercase());
            upper = false;
        } else {
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_keys_are_camel_case() {
        assert_eq!(camel_case("last_triggered_at"), "lastTriggeredAt");
        assert_eq!(camel_case("id"), "id");
    }
}
