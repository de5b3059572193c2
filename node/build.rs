//! Rebuilds the crate when a main-DB migration is added or changed: `sqlx::migrate!` embeds
//! `migrations/main` at compile time and does not track new files by itself.

fn main() {
    println!("cargo:rerun-if-changed=../migrations/main");
}
