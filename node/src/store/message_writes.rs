//! Which sessions' stored messages this process has changed: a generation per session that rises after every
//! committed write to its `messages` rows, and one that rises on writes that may touch any session (an
//! import). A reader that keeps whole message pages (`messaging/page_cache.rs`) takes the generation before
//! it reads a page and serves the kept page only while the generation is unchanged. It counts this process's
//! writes alone, so it can vouch for a page only where this process is the data DB's sole writer of messages.
//!
//! Writers raise it after the commit, never before: a reader that takes the old generation while the write is
//! in flight keeps its page under the old generation, which the raise then retires. One process-wide table
//! (several nodes in one test process only retire each other's pages sooner).

use std::collections::HashMap;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

/// A session's messages as of some moment: writes to every session, then writes to this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Generation(u64, u64);

static EVERY_SESSION: AtomicU64 = AtomicU64::new(0);

/// Entries are never removed: one per session written since boot, a few dozen bytes each.
static PER_SESSION: LazyLock<RwLock<HashMap<Box<str>, u64>>> = LazyLock::new(Default::default);

/// The session's generation now.
pub(crate) fn generation(session_id: &str) -> Generation {
    let every = EVERY_SESSION.load(Ordering::SeqCst);
    let own = PER_SESSION.read().get(session_id).copied().unwrap_or(0);
    Generation(every, own)
}

/// The sessions' messages changed (a commit that wrote them has finished, or failed in a way that may have
/// committed).
pub(crate) fn changed<'a>(session_ids: impl IntoIterator<Item = &'a str>) {
    let mut table = PER_SESSION.write();
    for id in session_ids {
        match table.get_mut(id) {
            Some(own) => *own += 1,
            None => {
                table.insert(id.into(), 1);
            }
        }
    }
}

/// Messages of any session may have changed.
pub(crate) fn changed_everywhere() {
    EVERY_SESSION.fetch_add(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_moves_its_own_session_and_an_import_moves_all() {
        let (a, b) = ("gen-test-a", "gen-test-b");
        let (a0, b0) = (generation(a), generation(b));
        changed([a]);
        assert_ne!(generation(a), a0);
        // Only the other session's own count: another test may import meanwhile.
        assert_eq!(generation(b).1, b0.1);
        let (a1, b1) = (generation(a), generation(b));
        changed_everywhere();
        assert_ne!(generation(a), a1);
        assert_ne!(generation(b), b1);
    }
}
