//! Automation rules: CRUD with validation, and (in `matcher`) the reply to inbound messages. Input: parsed
//! requests from `http/automation_rules.rs` and the pipeline's live feed. Sending goes through the
//! `AutomationSender` hook, which the session service implements; this module never holds an engine.

mod matcher;
mod sender;

pub(crate) use sender::SessionSender;

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use dashmap::DashMap;
use wagate_proto::dto::automation::{CreateAutomationRuleRequest, UpdateAutomationRuleRequest};
use wagate_proto::dto::webhooks::FilterCondition;

use crate::events::filter;
use crate::events::memo::SessionMemo;
use crate::store::automation::{self as rule_store, RuleRecord};
use crate::store::{DataPool, StoreError, now_ms};

/// Sends the reply of a rule as a text message from the session. Implemented by the session service.
#[async_trait::async_trait]
pub(crate) trait AutomationSender: Send + Sync {
    async fn send_text(&self, session_id: &str, chat_id: &str, text: &str) -> Result<(), String>;
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RuleError {
    #[error("{0}")]
    Invalid(String),
    #[error("Automation rule {0} not found")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

type RuleResult<T> = Result<T, RuleError>;

const MAX_COOLDOWN_SECONDS: i64 = 30 * 24 * 3600;

pub(crate) struct AutomationService {
    db: DataPool,
    /// Rules per session, oldest first; dropped on every change here, aged out for changes made on
    /// another node while the session ran elsewhere (`events/memo.rs`).
    cache: SessionMemo<Vec<RuleRecord>>,
    /// Last reply time per (rule id, chat id), epoch ms: the cooldowns of an embedded node, and a cluster
    /// node's own decisions while Redis does not answer.
    cooldowns: DashMap<(String, String), i64>,
    /// In a cluster the cooldowns live in Redis, so a session that moves to another node keeps them.
    shared_cooldowns: Option<matcher::SharedCooldowns>,
    sender: ArcSwapOption<Box<dyn AutomationSender>>,
}

impl AutomationService {
    pub(crate) fn new(db: DataPool) -> AutomationService {
        AutomationService {
            db,
            cache: SessionMemo::new(),
            cooldowns: DashMap::new(),
            shared_cooldowns: None,
            sender: ArcSwapOption::empty(),
        }
    }

    /// Cooldowns kept in Redis under `{prefix}auto-cooldown:` (a cluster).
    pub(crate) fn with_shared_cooldowns(
        mut self,
        pool: deadpool_redis::Pool,
        prefix: &str,
    ) -> AutomationService {
        self.shared_cooldowns = Some(matcher::SharedCooldowns::new(pool, prefix));
        self
    }

    /// Drops every cached rule list (after a data import replaced the rules).
    pub(crate) fn forget_all(&self) {
        self.cache.invalidate_all();
    }

    /// Installs the hook replies go through; until then matching rules only log.
    pub(crate) fn set_sender(&self, sender: Box<dyn AutomationSender>) {
        self.sender.store(Some(Arc::new(sender)));
    }

    pub(crate) async fn create(
        &self,
        session_id: &str,
        req: CreateAutomationRuleRequest,
    ) -> RuleResult<RuleRecord> {
        let now = now_ms();
        let rule = RuleRecord {
            id: uuid::Uuid::new_v4().to_string(),
            session_id: session_id.to_owned(),
            name: name(req.name)?,
            enabled: req.enabled.unwrap_or(true),
            conditions: conditions(req.conditions.unwrap_or_default())?,
            reply_text: reply_text(req.reply_text)?,
            cooldown_seconds: cooldown(req.cooldown_seconds.unwrap_or(0))?,
            created_at: now,
            updated_at: now,
        };
        rule_store::insert(&self.db, &rule).await?;
        self.cache.invalidate(session_id);
        Ok(rule)
    }

    pub(crate) async fn get(&self, session_id: &str, id: &str) -> RuleResult<RuleRecord> {
        rule_store::get(&self.db, session_id, id)
            .await
            .map_err(|e| not_found(e, id))
    }

    pub(crate) async fn list(&self, session_id: &str) -> RuleResult<Vec<RuleRecord>> {
        Ok(rule_store::list_for_session(&self.db, session_id).await?)
    }

    pub(crate) async fn update(
        &self,
        session_id: &str,
        id: &str,
        req: UpdateAutomationRuleRequest,
    ) -> RuleResult<RuleRecord> {
        let mut rule = self.get(session_id, id).await?;
        if let Some(n) = req.name {
            rule.name = name(n)?;
        }
        if let Some(e) = req.enabled {
            rule.enabled = e;
        }
        if let Some(c) = req.conditions {
            rule.conditions = conditions(c)?;
        }
        if let Some(t) = req.reply_text {
            rule.reply_text = reply_text(t)?;
        }
        if let Some(c) = req.cooldown_seconds {
            rule.cooldown_seconds = cooldown(c)?;
        }
        rule.updated_at = now_ms();
        rule_store::update(&self.db, &rule)
            .await
            .map_err(|e| not_found(e, id))?;
        self.cache.invalidate(session_id);
        Ok(rule)
    }

    pub(crate) async fn delete(&self, session_id: &str, id: &str) -> RuleResult<()> {
        rule_store::delete(&self.db, session_id, id)
            .await
            .map_err(|e| not_found(e, id))?;
        self.cache.invalidate(session_id);
        Ok(())
    }

    async fn rules_of(&self, session_id: &str) -> RuleResult<Arc<Vec<RuleRecord>>> {
        if let Some(hit) = self.cache.fresh(session_id) {
            return Ok(hit);
        }
        let ticket = self.cache.ticket();
        let rules = Arc::new(rule_store::list_for_session(&self.db, session_id).await?);
        self.cache.keep(session_id, ticket, rules.clone());
        Ok(rules)
    }
}

pub(crate) use matcher::spawn_matcher;

/// The fields of a rule row a data import brings (`admin/import.rs`), held to the rules of `create`.
/// `None` is a field the row lacks, which the database refuses or defaults on its own.
pub(crate) fn check_imported(
    rule_name: Option<&str>,
    rule_conditions: Option<Vec<FilterCondition>>,
    rule_reply: Option<&str>,
    cooldown_seconds: Option<i64>,
) -> Result<(), String> {
    let message = |e: RuleError| e.to_string();
    if let Some(n) = rule_name {
        name(n.to_owned()).map_err(message)?;
    }
    if let Some(c) = rule_conditions {
        conditions(c).map_err(message)?;
    }
    if let Some(t) = rule_reply {
        reply_text(t.to_owned()).map_err(message)?;
    }
    if let Some(c) = cooldown_seconds {
        cooldown(c).map_err(message)?;
    }
    Ok(())
}

fn not_found(err: StoreError, id: &str) -> RuleError {
    match err {
        StoreError::NotFound => RuleError::NotFound(id.to_owned()),
        other => RuleError::Store(other),
    }
}

fn name(raw: String) -> RuleResult<String> {
    let n = raw.trim();
    if n.is_empty() || n.chars().count() > 100 {
        return Err(RuleError::Invalid("name must be 1-100 characters".into()));
    }
    crate::names::printable("name", n).map_err(RuleError::Invalid)?;
    Ok(n.to_owned())
}

fn reply_text(raw: String) -> RuleResult<String> {
    if raw.trim().is_empty() || raw.chars().count() > 4096 {
        return Err(RuleError::Invalid(
            "replyText must be 1-4096 characters".into(),
        ));
    }
    Ok(raw)
}

fn cooldown(raw: i64) -> RuleResult<i64> {
    if !(0..=MAX_COOLDOWN_SECONDS).contains(&raw) {
        return Err(RuleError::Invalid(format!(
            "cooldownSeconds must be between 0 and {MAX_COOLDOWN_SECONDS}"
        )));
    }
    Ok(raw)
}

fn conditions(raw: Vec<FilterCondition>) -> RuleResult<Vec<FilterCondition>> {
    filter::validate(&raw).map_err(|m| RuleError::Invalid(m.replace("filters.", "")))?;
    Ok(raw)
}
