//! What one socket receives: its subscriptions (session id or `*`, event names or `*`), the delivery rule
//! (key scope, `session.qr` only for OPERATOR/ADMIN) and the periodic key re-check. Pure apart from the
//! session-exists read on subscribe, which asks the session service.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use wagate_proto::dto::ws::{ClientFrame, codes};
use wagate_proto::{EventName, Role};

use crate::events::Event;
use crate::keys::KeyService;
use crate::sessions::{SessionError, SessionService};
use crate::store::keys::ApiKey;
use crate::store::now_ms;

const ANY: &str = "*";

type FrameError = (&'static str, String);

/// Subscriptions by session id (`*` = every session the key covers); `None` events = every event.
/// `excluded` holds what an unsubscribe of one session took out of a `*` subscription (`None` = all).
#[derive(Debug, Default)]
pub(super) struct Subscriptions {
    by_session: HashMap<String, Option<HashSet<EventName>>>,
    excluded: HashMap<String, Option<HashSet<EventName>>>,
}

impl Subscriptions {
    /// Applies a subscribe or unsubscribe frame; answers the reply's fields or an error code and message.
    pub(super) async fn apply(
        &mut self,
        sessions: &SessionService,
        key: &ApiKey,
        frame: &ClientFrame,
        is_subscribe: bool,
    ) -> Result<Map<String, Value>, FrameError> {
        let session = session_of(sessions, key, frame.session_id.as_deref(), is_subscribe).await?;
        let events = events_of(frame.events.as_deref())?;
        let fields = Map::from_iter([
            ("sessionId".to_owned(), json!(session)),
            (
                "events".to_owned(),
                json!(frame.events.clone().unwrap_or_default()),
            ),
        ]);
        self.change(session, events, is_subscribe);
        Ok(fields)
    }

    /// Adds or takes out `events` (`None` = all) for `session` (or `*`). Unsubscribing one session from
    /// what a `*` subscription gives it excludes those events for that session.
    fn change(&mut self, session: String, events: Option<HashSet<EventName>>, is_subscribe: bool) {
        if is_subscribe {
            self.include(&session, events.as_ref());
            add_to(&mut self.by_session, session, events);
        } else {
            if session != ANY && self.by_session.contains_key(ANY) {
                add_to(&mut self.excluded, session.clone(), events.clone());
            }
            remove_from(&mut self.by_session, &session, events.as_ref());
        }
    }

    /// A subscribe to `session` takes its events out of what an earlier unsubscribe excluded.
    fn include(&mut self, session: &str, events: Option<&HashSet<EventName>>) {
        if session == ANY {
            self.excluded.clear();
        } else {
            remove_from(&mut self.excluded, session, events);
        }
    }

    /// Whether this socket gets `event`.
    pub(super) fn wants(&self, key: &ApiKey, event: &Event) -> bool {
        if !may_access(key, &event.session_id) {
            return false;
        }
        if event.name.is_credential() && key.role < Role::Operator {
            return false;
        }
        self.covers(&event.session_id, event.name)
    }

    fn covers(&self, session_id: &str, name: EventName) -> bool {
        let named = |s: &str| holds(&self.by_session, s, name);
        named(session_id) || (named(ANY) && !holds(&self.excluded, session_id, name))
    }
}

/// Whether `sets` has `name` for `session` (`None` = every event).
fn holds(
    sets: &HashMap<String, Option<HashSet<EventName>>>,
    session: &str,
    name: EventName,
) -> bool {
    sets.get(session)
        .is_some_and(|evs| evs.as_ref().is_none_or(|set| set.contains(&name)))
}

fn add_to(
    sets: &mut HashMap<String, Option<HashSet<EventName>>>,
    session: String,
    events: Option<HashSet<EventName>>,
) {
    let entry = sets.entry(session).or_insert_with(|| Some(HashSet::new()));
    match (entry.as_mut(), events) {
        (Some(have), Some(add)) => have.extend(add),
        _ => *entry = None,
    }
}

fn remove_from(
    sets: &mut HashMap<String, Option<HashSet<EventName>>>,
    session: &str,
    events: Option<&HashSet<EventName>>,
) {
    let Some(entry) = sets.get_mut(session) else {
        return;
    };
    let Some(remove) = events else {
        sets.remove(session);
        return;
    };
    let have = entry.get_or_insert_with(|| EventName::ALL.iter().copied().collect());
    have.retain(|e| !remove.contains(e));
    if have.is_empty() {
        sets.remove(session);
    }
}

fn may_access(key: &ApiKey, session_id: &str) -> bool {
    key.allowed_sessions
        .as_ref()
        .is_none_or(|list| list.iter().any(|s| s == session_id))
}

async fn session_of(
    sessions: &SessionService,
    key: &ApiKey,
    raw: Option<&str>,
    must_exist: bool,
) -> Result<String, FrameError> {
    let raw = raw.ok_or((codes::INVALID_SESSION, "sessionId is required".to_owned()))?;
    if raw == ANY {
        return Ok(ANY.to_owned());
    }
    let id = uuid::Uuid::parse_str(raw)
        .map_err(|_| {
            (
                codes::INVALID_SESSION,
                format!("Invalid session id '{raw}'"),
            )
        })?
        .to_string();
    if !may_access(key, &id) {
        return Err((
            codes::FORBIDDEN_SESSION,
            "This API key is not allowed to access this session".to_owned(),
        ));
    }
    if must_exist {
        match sessions.record(&id).await {
            Ok(_) => {}
            Err(SessionError::NotFound(_)) => {
                return Err((codes::INVALID_SESSION, format!("Session {id} not found")));
            }
            Err(e) => return Err((codes::INVALID_SESSION, format!("Cannot check session: {e}"))),
        }
    }
    Ok(id)
}

/// `None` = every event.
fn events_of(raw: Option<&[String]>) -> Result<Option<HashSet<EventName>>, FrameError> {
    let list = raw.filter(|l| !l.is_empty()).ok_or((
        codes::INVALID_EVENTS,
        "events must be a non-empty list".to_owned(),
    ))?;
    if list.iter().any(|e| e == ANY) {
        return Ok(None);
    }
    list.iter()
        .map(|e| {
            e.parse::<EventName>()
                .map_err(|_| (codes::INVALID_EVENTS, format!("Unknown event name '{e}'")))
        })
        .collect::<Result<HashSet<_>, _>>()
        .map(Some)
}

/// The outcome of re-checking a live socket's key.
pub(super) enum KeyCheck {
    /// Still valid; carries the current record (a rename or a role change applies from now on).
    Keep(Arc<ApiKey>),
    Evict(&'static str),
}

/// Deleted, revoked, expired or narrowed (a lower role, `allowedSessions` lost a session or became a
/// list, or `allowedIps` no longer admits the socket's client) evicts; a wider role or scope is taken over
/// without a reconnect.
pub(super) fn recheck(keys: &KeyService, key: &ApiKey, client: Option<IpAddr>) -> KeyCheck {
    let Some(current) = keys.current(&key.id) else {
        return KeyCheck::Evict("API key was deleted");
    };
    if !current.is_active {
        return KeyCheck::Evict("API key is revoked");
    }
    if current.expires_at.is_some_and(|at| at <= now_ms()) {
        return KeyCheck::Evict("API key has expired");
    }
    let narrowed = match (&key.allowed_sessions, &current.allowed_sessions) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(before), Some(now)) => before.iter().any(|s| !now.contains(s)),
    };
    if narrowed {
        return KeyCheck::Evict("API key's allowed sessions were narrowed");
    }
    if current.role < key.role {
        return KeyCheck::Evict("API key's role was narrowed");
    }
    if !crate::keys::address_allowed(&current, client) {
        return KeyCheck::Evict("API key's allowed addresses no longer include this client");
    }
    KeyCheck::Keep(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S1: &str = "11111111-1111-4111-8111-111111111111";
    const S2: &str = "22222222-2222-4222-8222-222222222222";

    fn events(names: &[EventName]) -> Option<HashSet<EventName>> {
        Some(names.iter().copied().collect())
    }

    #[test]
    fn unsubscribing_one_session_narrows_a_wildcard_subscription() {
        let mut subs = Subscriptions::default();
        subs.change(ANY.into(), None, true);
        subs.change(S1.into(), events(&[EventName::MessageReceived]), false);
        assert!(!subs.covers(S1, EventName::MessageReceived));
        assert!(subs.covers(S1, EventName::MessageAck));
        assert!(subs.covers(S2, EventName::MessageReceived));
        // Subscribing again brings it back.
        subs.change(S1.into(), events(&[EventName::MessageReceived]), true);
        assert!(subs.covers(S1, EventName::MessageReceived));
        // A whole-session unsubscribe excludes everything of that session.
        subs.change(S2.into(), None, false);
        assert!(!subs.covers(S2, EventName::SessionStatus));
        assert!(subs.covers(S1, EventName::SessionStatus));
        // Unsubscribing `*` ends the wildcard.
        subs.change(ANY.into(), None, false);
        assert!(!subs.covers(S1, EventName::MessageAck));
        assert!(subs.covers(S1, EventName::MessageReceived));
    }
}
