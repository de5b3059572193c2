//! Message JSON kept between page reads, two ways.
//!
//! Rows: a message's API JSON by row id, with the row version it was built from. A page asks the store for its
//! rows' ids and versions only, serves each row whose kept version matches, and reads and builds the rest.
//! Every update of a row raises its version in the same statement (and an import restamps them all), so kept
//! JSON is never served past a write, on whichever node shares the database. A reply's JSON also shows the
//! text of the message it quotes, so it is kept under the quoted row's version too (none while that row is
//! not stored): an edit or a revoke of the quoted message retires the reply's kept JSON.
//!
//! Whole pages: where this process is the data DB's only writer of messages (SQLite, no cluster), a page's
//! JSON by its query, with the session's write generation (`store/message_writes.rs`) taken before it was
//! read; served while that generation stands, without going to the database at all. Elsewhere another node's
//! write would not move the generation here, so pages always ask the store.
//!
//! Rows with media, and pages holding one, are not kept: their JSON reads the media store (inline data, or
//! `omitted` once the object is gone).

use std::hash::Hash;

use bytes::Bytes;
use hashlink::LruCache;
use parking_lot::Mutex;

use crate::store::message_writes::{self, Generation};
use crate::store::messages::{PageKey, PageQuery};

/// Bytes of message JSON kept per kind, least recently read dropped first: about ten thousand short text
/// messages, and a few hundred 50-message pages, what a few busy dashboards poll.
const BUDGET_BYTES: usize = 4 << 20;

/// Per-entry bookkeeping counted against the budget besides the JSON and the key.
const ENTRY_OVERHEAD: usize = 96;

/// What a row's kept JSON was built from: the row's version and the version of the row it quotes.
type RowTag = (i64, Option<i64>);

pub(crate) struct PageCache {
    rows: Budgeted<String, RowTag>,
    /// `None`: another process may write messages, so whole pages are never kept.
    pages: Option<Budgeted<PageId, Generation>>,
}

/// What a whole page is kept by: everything of its query that changes its rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PageId {
    session_id: String,
    chat_id: Option<String>,
    from: Option<String>,
    direction: Option<String>,
    kind: Option<String>,
    offset: i64,
    limit: i64,
    inline: bool,
}

impl PageId {
    fn cost(&self) -> usize {
        let text = |t: &Option<String>| t.as_ref().map_or(0, String::len);
        self.session_id.len()
            + text(&self.chat_id)
            + text(&self.from)
            + text(&self.direction)
            + text(&self.kind)
    }
}

/// A page that may be kept whole, and the session's generation taken before the store was asked for it.
pub(crate) struct WholePage {
    id: PageId,
    generation: Generation,
}

impl PageCache {
    /// `sole_writer`: this process alone writes the data DB's messages, so whole pages may be kept.
    pub(crate) fn new(sole_writer: bool) -> PageCache {
        PageCache {
            rows: Budgeted::new(BUDGET_BYTES),
            pages: sole_writer.then(|| Budgeted::new(BUDGET_BYTES)),
        }
    }

    /// The kept JSON of each row of a page whose version matches, in page order (`None`: read it).
    pub(crate) fn get_many(&self, keys: &[PageKey]) -> Vec<Option<Bytes>> {
        let mut held = self.rows.held.lock();
        keys.iter()
            .map(|key| match held.entries.get(key.id.as_str()) {
                Some(kept) if key.plain && kept.tag == (key.version, key.quoted_version) => {
                    Some(kept.json.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// Keeps a row's JSON as built from `version` of the row and `quoted_version` of the row it quotes,
    /// replacing what was kept for the row.
    pub(crate) fn put(&self, id: String, version: i64, quoted_version: Option<i64>, json: Bytes) {
        let cost = id.len();
        self.rows.put(id, cost, (version, quoted_version), json);
    }

    /// The page `page` of the session asks for, if whole pages are kept and it is not a cursor page (a cursor
    /// names a row, which the store must look up anyway). Take it before reading the page.
    pub(crate) fn whole_page(
        &self,
        session_id: &str,
        page: &PageQuery,
        inline: bool,
    ) -> Option<WholePage> {
        if self.pages.is_none() || page.after.is_some() {
            return None;
        }
        let id = PageId {
            session_id: session_id.to_owned(),
            chat_id: page.chat_id.clone(),
            from: page.from.clone(),
            direction: page.direction.clone(),
            kind: page.kind.clone(),
            offset: page.offset,
            limit: page.limit,
            inline,
        };
        Some(WholePage {
            id,
            generation: message_writes::generation(session_id),
        })
    }

    /// The kept JSON of the page, if no write to its session has finished since it was kept.
    pub(crate) fn get_page(&self, page: &WholePage) -> Option<Bytes> {
        let mut held = self.pages.as_ref()?.held.lock();
        match held.entries.get(&page.id) {
            Some(kept) if kept.tag == page.generation => Some(kept.json.clone()),
            _ => None,
        }
    }

    /// Keeps the page's JSON under the generation taken before it was read: a write that finished meanwhile
    /// has already moved the generation on, so this copy is never served past it.
    pub(crate) fn put_page(&self, page: WholePage, json: Bytes) {
        if let Some(pages) = &self.pages {
            let cost = page.id.cost();
            pages.put(page.id, cost, page.generation, json);
        }
    }
}

/// JSON by key, each with the tag it is valid for, under a byte budget, least recently read dropped first.
struct Budgeted<K, T> {
    held: Mutex<Held<K, T>>,
    budget: usize,
}

struct Held<K, T> {
    entries: LruCache<K, Kept<T>>,
    bytes: usize,
}

struct Kept<T> {
    tag: T,
    json: Bytes,
    /// What it counts against the budget.
    cost: usize,
}

impl<K: Hash + Eq, T> Budgeted<K, T> {
    fn new(budget: usize) -> Self {
        Budgeted {
            held: Mutex::new(Held {
                entries: LruCache::new_unbounded(),
                bytes: 0,
            }),
            budget,
        }
    }

    /// Keeps `json` for `key` (whose own size is `key_cost`), replacing what was kept for it.
    fn put(&self, key: K, key_cost: usize, tag: T, json: Bytes) {
        let cost = json.len() + key_cost + ENTRY_OVERHEAD;
        if cost > self.budget {
            return;
        }
        let mut held = self.held.lock();
        if let Some(old) = held.entries.insert(key, Kept { tag, json, cost }) {
            held.bytes -= old.cost;
        }
        held.bytes += cost;
        while held.bytes > self.budget {
            let Some((_, old)) = held.entries.remove_lru() else {
                held.bytes = 0;
                break;
            };
            held.bytes -= old.cost;
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
            quoted_version: None,
        }
    }

    #[test]
    fn a_row_is_served_only_at_the_version_it_was_built_from() {
        let cache = PageCache::new(false);
        cache.put("m1".into(), 3, None, Bytes::from_static(b"{\"v\":3}"));
        let got = cache.get_many(&[key("m1", 3, true), key("m1", 4, true), key("m2", 0, true)]);
        assert_eq!(got[0].as_deref(), Some(&b"{\"v\":3}"[..]));
        assert_eq!(got[1], None);
        assert_eq!(got[2], None);
    }

    #[test]
    fn a_reply_is_served_only_while_the_row_it_quotes_stands() {
        let cache = PageCache::new(false);
        let quoting = |quoted_version| PageKey {
            quoted_version,
            ..key("r1", 2, true)
        };
        cache.put("r1".into(), 2, Some(5), Bytes::from_static(b"{\"q\":5}"));
        assert!(cache.get_many(&[quoting(Some(5))])[0].is_some());
        // The quoted message was edited or revoked, or is no longer stored.
        assert_eq!(cache.get_many(&[quoting(Some(6))]), vec![None]);
        assert_eq!(cache.get_many(&[quoting(None)]), vec![None]);
        // Built before the quoted message was stored: not served once it is.
        cache.put("r1".into(), 2, None, Bytes::from_static(b"{}"));
        assert_eq!(cache.get_many(&[quoting(Some(0))]), vec![None]);
    }

    #[test]
    fn a_row_with_media_is_never_served_from_memory() {
        let cache = PageCache::new(false);
        cache.put("m1".into(), 0, None, Bytes::from_static(b"{}"));
        assert_eq!(cache.get_many(&[key("m1", 0, false)]), vec![None]);
    }

    #[test]
    fn the_least_recently_read_go_first_past_the_budget() {
        let entry = 10 + 2 + ENTRY_OVERHEAD;
        let cache = PageCache {
            rows: Budgeted::new(entry * 2),
            pages: None,
        };
        let json = || Bytes::from_static(b"0123456789");
        cache.put("m1".into(), 0, None, json());
        cache.put("m2".into(), 0, None, json());
        // Reading m1 makes m2 the least recently used.
        assert!(cache.get_many(&[key("m1", 0, true)])[0].is_some());
        cache.put("m3".into(), 0, None, json());
        let got = cache.get_many(&[key("m1", 0, true), key("m2", 0, true), key("m3", 0, true)]);
        assert!(got[0].is_some() && got[1].is_none() && got[2].is_some());
        // Replacing a row's JSON does not count it twice.
        cache.put("m3".into(), 1, None, json());
        cache.put("m3".into(), 2, None, json());
        assert!(cache.get_many(&[key("m1", 0, true)])[0].is_some());
        assert_eq!(cache.rows.held.lock().bytes, entry * 2);
    }

    fn first_page() -> PageQuery {
        PageQuery {
            limit: 50,
            ..Default::default()
        }
    }

    #[test]
    fn a_whole_page_is_served_until_its_session_is_written() {
        let cache = PageCache::new(true);
        let session = uuid::Uuid::new_v4().to_string();
        let page = || cache.whole_page(&session, &first_page(), true);
        let read = page().expect("a first page is kept whole");
        assert_eq!(cache.get_page(&read), None);
        cache.put_page(read, Bytes::from_static(b"[1]"));
        let again = page().expect("kept whole");
        assert_eq!(cache.get_page(&again).as_deref(), Some(&b"[1]"[..]));
        message_writes::changed([session.as_str()]);
        let after_write = page().expect("kept whole");
        assert_eq!(cache.get_page(&after_write), None);
    }

    #[test]
    fn a_page_read_while_a_write_commits_is_retired_by_it() {
        let cache = PageCache::new(true);
        let session = uuid::Uuid::new_v4().to_string();
        // Taken before the write finished; the page the store gave may predate it.
        let read = cache
            .whole_page(&session, &first_page(), true)
            .expect("kept whole");
        message_writes::changed([session.as_str()]);
        cache.put_page(read, Bytes::from_static(b"[]"));
        let next = cache
            .whole_page(&session, &first_page(), true)
            .expect("kept whole");
        assert_eq!(cache.get_page(&next), None);
    }

    #[test]
    fn cursor_pages_and_shared_databases_keep_no_whole_page() {
        let session = "s1";
        let cursor = PageQuery {
            after: Some((1, "m1".into())),
            ..first_page()
        };
        assert!(
            PageCache::new(true)
                .whole_page(session, &cursor, true)
                .is_none()
        );
        assert!(
            PageCache::new(false)
                .whole_page(session, &first_page(), true)
                .is_none()
        );
    }

    #[test]
    fn pages_of_other_queries_are_kept_apart() {
        let cache = PageCache::new(true);
        let session = uuid::Uuid::new_v4().to_string();
        let chat = PageQuery {
            chat_id: Some("49151@c.us".into()),
            ..first_page()
        };
        let all = cache
            .whole_page(&session, &first_page(), true)
            .expect("kept whole");
        cache.put_page(all, Bytes::from_static(b"[1,2]"));
        let one_chat = cache.whole_page(&session, &chat, true).expect("kept whole");
        assert_eq!(cache.get_page(&one_chat), None);
    }
}
