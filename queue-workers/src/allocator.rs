//! The process allocator of both binaries: mimalloc (each `main` names [`Allocator`] as the global
//! allocator and calls [`tune`] first). Under load glibc's arenas were a quarter of a read's CPU and their
//! locks, taken by SQLite's connection threads and the runtime's workers at once, another fifth; mimalloc's
//! per-thread heaps take neither.
//!
//! Two settings keep its idle footprint near glibc's (anonymous RSS of an idle node, measured: glibc 12 MB,
//! mimalloc as shipped 45-47 MB): transparent huge pages off for its memory (the `no_thp` build feature;
//! with them each thread's first touch of an arena brought in a 2 MiB page), and freed pages returned at
//! once instead of after a delay, because the delay is only honoured on a later allocation, which an idle
//! thread never makes.

use libmimalloc_sys::{mi_option_set, mi_option_t};

pub use mimalloc::MiMalloc as Allocator;

/// `mi_option_purge_delay` of mimalloc v3's `mimalloc.h` (the sixteenth option, after the deprecated
/// ones); `libmimalloc-sys` names only the options of older releases. Checked by a test against its
/// default, so an upgrade that moves it fails there.
const PURGE_DELAY: mi_option_t = 15;

/// Applies the settings above. Both `main`s call it first; the option is one atomic value, so the runtime's
/// threads, already started by then, follow it from their next free on.
pub fn tune() {
    // SAFETY: sets one integer option of the allocator; any value is valid for it.
    unsafe { mi_option_set(PURGE_DELAY, 0) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libmimalloc_sys::mi_option_get;

    #[test]
    fn the_purge_delay_option_is_the_one_tuned() {
        // SAFETY: reads one integer option.
        let shipped = unsafe { mi_option_get(PURGE_DELAY) };
        assert_eq!(shipped, 1000, "mimalloc v3 ships a 1000 ms purge delay");
        tune();
        // SAFETY: as above.
        assert_eq!(unsafe { mi_option_get(PURGE_DELAY) }, 0);
    }
}
