//! Rebuilds the crate when a main-DB migration is added or changed (`sqlx::migrate!` embeds
//! `migrations/main` at compile time and does not track new files by itself), and links the binary as a
//! position-dependent executable on Linux.
//!
//! Why not PIE: a position-independent executable is relocated at every start, and the loader writes the
//! final address into every pointer of its read-only data (vtables, string tables, the route and OpenAPI
//! tables), which makes each of those pages a private copy: 1.5 MB of an idle node's anonymous memory that
//! never goes back to the file. Linked at a fixed address they are clean file pages, mapped only when read.
//! The cost is that the binary's own image is not randomised (the heap, stacks and shared libraries still
//! are). `WAGATE_LINK_PIE=1` at build time keeps the toolchain's PIE default.

fn main() {
    println!("cargo:rerun-if-changed=../migrations/main");
    println!("cargo:rerun-if-env-changed=WAGATE_LINK_PIE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let keep_pie = std::env::var("WAGATE_LINK_PIE").is_ok_and(|v| v == "1");
    if linux && !keep_pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
