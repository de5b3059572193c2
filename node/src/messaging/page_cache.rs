//! Message JSON kept between page reads: a message's API JSON by row id, with the row version it was built
//! from. A page asks the store for its rows' ids and versions only, serves each row whose kept version
//! matches, and reads and builds the rest. Every update of a row raises its version in the same statement
//! (and an import restamps them all), so kept JSON is never served past a write, on whichever node shares the
//! database. Rows with media are not kept: their JSON reads the media store (inline data, or `omitted` once
//! the object is gone).

use bytes::Bytes;
use hashlink::LruCache;
use parking_lot::Mutex;

use crate::store::messages::PageKey;

/// Bytes of message JSON kept, least recently read dropped first: about ten thousand short text messages,
/// the pages a few busy dashboards poll.
const BUDGET_BYTES: usize = 4 << 20;

/// Per-entry bookkeeping counted against the budget besides the JSON itself.
const ENTRY_OVERHEAD: usize = 96;

pub(crate) struct PageCache {
    held: Mutex<Held>,
    budget: usize,
}

struct Held {
    entries: LruCache<String, (i64, Bytes)>,
    bytes: usize,
}

impl Default for PageCache {
    fn default() -> Self {
        PageCache::with_budget(BUDGET_BYTES)
    }
}

impl PageCache {
    fn with_budget(budget: usize) -> PageCache {
        PageCache {
            held: Mutex::new(Held {
                entries: LruCache::new_unbounded(),
                bytes: 0,
            }),
            budget,
        }
    }

    /// The kept JSON of each row of a page whose version matches, in page order (`None`: read it).
    pub(crate) fn get_many(&self, keys: &[PageKey]) -> Vec<Option<Bytes>> {
        let mut held = self.held.lock();
        keys.iter()
            .map(|key| match held.entries.get(key.id.as_str()) {
                Some((version, json)) if key.plain && *version == key.version => Some(json.clone()),
                _ => None,
            })
            .collect()
    }

    /// Keeps a row's JSON as built from `version`, replacing what was kept for the row.
    pub(crate) fn put(&self, id: String, version: i64, json: Bytes) {
        let cost = json.len() + id.len() + ENTRY_OVERHEAD;
        if cost > self.budget {
            return;
        }
        let mut held = self.held.lock();
        let id_len = id.len();
        if let Some((_, old)) = held.entries.insert(id, (version, json)) {
            held.bytes -= old.len() + id_len + ENTRY_OVERHEAD;
        }
        held.bytes += cost;
        while held.bytes > self.budget {
            let Some((old_id, (_, old))) = held.entries.remove_lru() else {
                held.bytes = 0;
                break;
            };
            held.bytes -= old.len() + old_id.len() + ENTRY_OVERHEAD;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str, version: i64, plain: bool) -> PageKey {
        PageKey {
            id: id.into(),
            version,
            plain,
        }
    }

    #[test]
    fn a_row_is_served_only_at_the_version_it_was_built_from() {
        let cache = PageCache::default();
        cache.put("m1".into(), 3, Bytes::from_static(b"{\"v\":3}"));
        let got = cache.get_many(&[key("m1", 3, true), key("m1", 4, true), key("m2", 0, true)]);
        assert_eq!(got[0].as_deref(), Some(&b"{\"v\":3}"[..]));
        assert_eq!(got[1], None);
        assert_eq!(got[2], None);
    }

    #[test]
    fn a_row_with_media_is_never_served_from_memory() {
        let cache = PageCache::default();
        cache.put("m1".into(), 0, Bytes::from_static(b"{}"));
        assert_eq!(cache.get_many(&[key("m1", 0, false)]), vec![None]);
    }

    #[test]
    fn the_least_recently_read_go_first_past_the_budget() {
        let entry = 10 + 2 + ENTRY_OVERHEAD;
        let cache = PageCache::with_budget(entry * 2);
        let json = || Bytes::from_static(b"0123456789");
        cache.put("m1".into(), 0, json());
        cache.put("m2".into(), 0, json());
        // Reading m1 makes m2 the least recently used.
        assert!(cache.get_many(&[key("m1", 0, true)])[0].is_some());
        cache.put("m3".into(), 0, json());
        let got = cache.get_many(&[key("m1", 0, true), key("m2", 0, true), key("m3", 0, true)]);
        assert!(got[0].is_some() && got[1].is_none() && got[2].is_some());
        // Replacing a row's JSON does not count it twice.
        cache.put("m3".into(), 1, json());
        cache.put("m3".into(), 2, json());
        assert!(cache.get_many(&[key("m1", 0, true)])[0].is_some());
        assert_eq!(cache.held.lock().bytes, entry * 2);
    }
}
