//! The automation matcher: reads `message.received` from the pipeline's live feed, picks the first enabled
//! rule of the session whose conditions hold, and replies once per cooldown per chat. Never replies to the
//! session's own messages. It does not persist anything; cooldowns live in memory, and in a cluster in
//! Redis (a session that moves to another node keeps them; while Redis does not answer, each node decides
//! with its own).

use std::sync::Arc;

use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wagate_proto::EventName;

use super::AutomationService;
use crate::events::{Event, Pipeline, filter};
use crate::store::automation::RuleRecord;
use crate::store::now_ms;

/// Runs the matcher until `shutdown`.
pub(crate) fn spawn_matcher(
    service: Arc<AutomationService>,
    pipeline: &Pipeline,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    let mut feed = pipeline.subscribe();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => break,
                next = feed.recv() => match next {
                    Ok(event) => event,
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "automation matcher fell behind; events skipped");
                        continue;
                    }
                    Err(RecvError::Closed) => break,
                },
            };
            service.on_event(&event).await;
        }
    })
}

/// The first enabled rule whose conditions hold for `data`.
fn first_match<'a>(rules: &'a [RuleRecord], data: &serde_json::Value) -> Option<&'a RuleRecord> {
    rules
        .iter()
        .filter(|r| r.enabled)
        .find(|r| filter::evaluate(&r.conditions, data).is_ok())
}

impl AutomationService {
    async fn on_event(&self, event: &Event) {
        if event.name != EventName::MessageReceived
            || event.data["fromMe"].as_bool().unwrap_or(false)
        {
            return;
        }
        let Some(chat_id) = event.data["chatId"].as_str() else {
            return;
        };
        let rules = match self.rules_of(&event.session_id).await {
            Ok(rules) => rules,
            Err(e) => {
                tracing::warn!(error = %e, "cannot load automation rules");
                return;
            }
        };
        let Some(rule) = first_match(&rules, &event.data) else {
            return;
        };
        if !self.claim(rule, chat_id).await {
            return;
        }
        let Some(sender) = self.sender.load_full() else {
            tracing::info!(rule_id = %rule.id, "automation rule matched; no sender installed");
            return;
        };
        if let Err(e) = sender
            .send_text(&event.session_id, chat_id, &rule.reply_text)
            .await
        {
            tracing::warn!(rule_id = %rule.id, error = %e, "automation reply failed");
        }
    }

    /// Whether the rule may reply in `chat_id` now (the cluster's cooldown when there is one); if so, the
    /// cooldown starts.
    async fn claim(&self, rule: &RuleRecord, chat_id: &str) -> bool {
        if let Some(shared) = &self.shared_cooldowns
            && rule.cooldown_seconds > 0
        {
            match shared.claim(rule, chat_id).await {
                Ok(claimed) => return claimed,
                Err(e) => {
                    tracing::warn!(rule_id = %rule.id, error = %e, "automation cooldown not read from Redis; deciding on this node")
                }
            }
        }
        self.claim_cooldown(rule, chat_id, now_ms())
    }

    /// Whether the rule may reply in `chat_id` now by this node's own record; if so, the cooldown starts.
    fn claim_cooldown(&self, rule: &RuleRecord, chat_id: &str, now: i64) -> bool {
        let key = (rule.id.clone(), chat_id.to_owned());
        let window = rule.cooldown_seconds.saturating_mul(1000);
        let mut entry = self.cooldowns.entry(key).or_insert(i64::MIN);
        if *entry != i64::MIN && now - *entry < window.max(1) && window > 0 {
            return false;
        }
        *entry = now;
        true
    }
}

/// How long a claim waits for Redis before the node decides alone.
const SHARED_CLAIM_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(250);

/// The cluster's cooldowns: one key per rule and chat, set only when absent, expiring with the cooldown.
pub(crate) struct SharedCooldowns {
    pool: deadpool_redis::Pool,
    prefix: String,
}

impl SharedCooldowns {
    pub(crate) fn new(pool: deadpool_redis::Pool, prefix: &str) -> SharedCooldowns {
        SharedCooldowns {
            pool,
            prefix: format!("{prefix}auto-cooldown:"),
        }
    }

    /// True when this call started the cooldown (nobody replied in the window).
    async fn claim(&self, rule: &RuleRecord, chat_id: &str) -> Result<bool, String> {
        let window_ms = u64::try_from(rule.cooldown_seconds.saturating_mul(1000)).unwrap_or(0);
        let key = format!("{}{}:{chat_id}", self.prefix, rule.id);
        let claim = async {
            let mut conn = self.pool.get().await.map_err(|e| e.to_string())?;
            let set: Option<String> = deadpool_redis::redis::cmd("SET")
                .arg(&key)
                .arg(1)
                .arg("NX")
                .arg("PX")
                .arg(window_ms.max(1))
                .query_async(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
            Ok(set.is_some())
        };
        tokio::time::timeout(SHARED_CLAIM_TIMEOUT, claim)
            .await
            .map_err(|_| "Redis did not answer in time".to_string())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(id: &str, enabled: bool, body: &str, cooldown_seconds: i64) -> RuleRecord {
        RuleRecord {
            id: id.into(),
            session_id: "s".into(),
            name: id.into(),
            enabled,
            conditions: vec![
                serde_json::from_value(
                    json!({"field": "body", "operator": "contains", "value": body}),
                )
                .unwrap(),
            ],
            reply_text: "hi".into(),
            cooldown_seconds,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn first_enabled_matching_rule_wins() {
        let rules = vec![
            rule("a", false, "price", 0),
            rule("b", true, "price", 0),
            rule("c", true, "", 0),
        ];
        let data = json!({"body": "what is the price?"});
        assert_eq!(first_match(&rules, &data).map(|r| r.id.as_str()), Some("b"));
        assert_eq!(
            first_match(&rules, &json!({"body": "hello"})).map(|r| r.id.as_str()),
            Some("c")
        );
    }

    #[tokio::test]
    async fn cooldown_is_per_rule_and_chat() {
        let db = crate::store::backends::connect_data_sqlite(std::path::Path::new(":memory:"))
            .await
            .unwrap();
        let svc = AutomationService::new(db);
        let r = rule("a", true, "x", 60);
        assert!(svc.claim_cooldown(&r, "chat1", 1_000));
        assert!(!svc.claim_cooldown(&r, "chat1", 30_000));
        assert!(svc.claim_cooldown(&r, "chat2", 30_000));
        assert!(svc.claim_cooldown(&r, "chat1", 61_001));
        let zero = rule("z", true, "x", 0);
        assert!(svc.claim_cooldown(&zero, "chat1", 1));
        assert!(svc.claim_cooldown(&zero, "chat1", 1));
    }
}
