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
#[derive(Debug, Default)]
pub(super) struct Subscriptions {
    by_session: HashMap<String, Option<HashSet<EventName>>>,
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
        if is_subscribe {
            let entry = self
                .by_session
                .entry(session)
                .or_insert_with(|| Some(HashSet::new()));
            match (entry.as_mut(), events) {
                (Some(have), Some(add)) => have.extend(add),
                _ => *entry = None,
            }
        } else if let Some(entry) = self.by_session.get_mut(&session) {
            match events {
                None => {
                    self.by_session.remove(&session);
                }
                Some(remove) => {
                    let have =
                        entry.get_or_insert_with(|| EventName::ALL.iter().copied().collect());
                    have.retain(|e| !remove.contains(e));
                    if have.is_empty() {
                        self.by_session.remove(&session);
                    }
                }
            }
        }
        Ok(fields)
    }

    /// Whether this socket gets `event`.
    pub(super) fn wants(&self, key: &ApiKey, event: &Event) -> bool {
        if !may_access(key, &event.session_id) {
            return false;
        }
        if event.name.is_credential() && key.role < Role::Operator {
            return false;
        }
        [event.session_id.as_str(), ANY].iter().any(|s| {
            self.by_session
                .get(*s)
                .is_some_and(|evs| evs.as_ref().is_none_or(|set| set.contains(&event.name)))
        })
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
