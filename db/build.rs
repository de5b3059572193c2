//! Rebuilds the crate when a data-DB migration is added or changed: `sqlx::migrate!` embeds the
//! `migrations/` folders at compile time and does not track new files by itself.

fn main() {
    println!("cargo:rerun-if-changed=../migrations/sqlite");
    println!("cargo:rerun-if-changed=../migrations/postgres");
}
