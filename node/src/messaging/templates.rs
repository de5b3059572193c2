//! Templates: per-session CRUD (`{name, body, header?, footer?}`, unique names) and send-template, which
//! renders `{{var}}` placeholders and sends the result as text. A blank header or footer is no header or
//! footer: stored as absent, and a part that renders blank is left out of the text.

use wagate_proto::dto::messages::{SendTemplateRequest, SendTextRequest};
use wagate_proto::dto::templates::{CreateTemplateRequest, Template, UpdateTemplateRequest};
use wagate_proto::iso_ms;

use super::MessagingService;
use super::draft::{self, Draft};
use super::error::{MessagingError, MessagingResult, bad};
use super::validate as v;
use crate::store::now_ms;
use crate::store::templates::{self as template_store, TemplateRow};

const NAME_MAX: usize = 100;

impl From<TemplateRow> for Template {
    fn from(t: TemplateRow) -> Template {
        Template {
            id: t.id,
            session_id: t.session_id,
            name: t.name,
            body: t.body,
            header: t.header,
            footer: t.footer,
            created_at: iso_ms(t.created_at),
            updated_at: iso_ms(t.updated_at),
        }
    }
}

fn not_found(id: &str) -> MessagingError {
    MessagingError::NotFound(format!("Template {id} not found"))
}

/// An optional part as stored: blank (empty or whitespace only) is absent.
fn part(raw: Option<String>) -> Option<String> {
    raw.filter(|p| !p.trim().is_empty())
}

fn check(row: &TemplateRow) -> MessagingResult<()> {
    v::required("name", Some(&row.name))?;
    v::max_chars("name", &row.name, NAME_MAX)?;
    crate::names::printable("name", &row.name).map_err(bad)?;
    v::required("body", Some(&row.body))?;
    v::max_chars("body", &row.body, v::TEXT_MAX)?;
    v::max_chars_opt("header", row.header.as_deref(), v::TEMPLATE_PART_MAX)?;
    v::max_chars_opt("footer", row.footer.as_deref(), v::TEMPLATE_PART_MAX)
}

impl MessagingService {
    pub(crate) async fn list_templates(&self, session_id: &str) -> MessagingResult<Vec<Template>> {
        self.check_session(session_id).await?;
        let rows = template_store::list(&self.db, session_id).await?;
        Ok(rows.into_iter().map(Template::from).collect())
    }

    pub(crate) async fn get_template(
        &self,
        session_id: &str,
        id: &str,
    ) -> MessagingResult<Template> {
        self.check_session(session_id).await?;
        let row = template_store::get(&self.db, session_id, id).await?;
        Ok(row.ok_or_else(|| not_found(id))?.into())
    }

    pub(crate) async fn create_template(
        &self,
        session_id: &str,
        b: CreateTemplateRequest,
    ) -> MessagingResult<Template> {
        self.check_session(session_id).await?;
        let now = now_ms();
        let row = TemplateRow {
            id: uuid::Uuid::new_v4().to_string(),
            session_id: session_id.to_string(),
            name: v::required("name", b.name.as_deref())?.trim().to_string(),
            body: v::required("body", b.body.as_deref())?.to_string(),
            header: part(b.header),
            footer: part(b.footer),
            created_at: now,
            updated_at: now,
        };
        check(&row)?;
        template_store::insert(&self.db, &row).await?;
        Ok(row.into())
    }

    pub(crate) async fn update_template(
        &self,
        session_id: &str,
        id: &str,
        b: UpdateTemplateRequest,
    ) -> MessagingResult<Template> {
        self.check_session(session_id).await?;
        let mut row = template_store::get(&self.db, session_id, id)
            .await?
            .ok_or_else(|| not_found(id))?;
        match b.name {
            Some(None) => return Err(bad("name must not be null")),
            Some(Some(name)) => row.name = name.trim().to_string(),
            None => {}
        }
        match b.body {
            Some(None) => return Err(bad("body must not be null")),
            Some(Some(body)) => row.body = body,
            None => {}
        }
        if let Some(header) = b.header {
            row.header = part(header);
        }
        if let Some(footer) = b.footer {
            row.footer = part(footer);
        }
        check(&row)?;
        template_store::update(&self.db, &row).await?;
        self.get_template(session_id, id).await
    }

    pub(crate) async fn delete_template(&self, session_id: &str, id: &str) -> MessagingResult<()> {
        self.check_session(session_id).await?;
        if !template_store::delete(&self.db, session_id, id).await? {
            return Err(not_found(id));
        }
        Ok(())
    }

    /// send-template -> a text draft with the rendered template.
    pub(crate) async fn template_draft(
        &self,
        session_id: &str,
        b: SendTemplateRequest,
    ) -> MessagingResult<Draft> {
        v::jid("chatId", b.chat_id.as_deref())?;
        let id = b.template_id.as_deref().filter(|s| !s.trim().is_empty());
        let name = b.template_name.as_deref().filter(|s| !s.trim().is_empty());
        if id.is_none() && name.is_none() {
            return Err(bad("templateId or templateName is required"));
        }
        // Both could name different templates; which one was meant is the caller's to say.
        if id.is_some() && name.is_some() {
            return Err(bad("give either templateId or templateName, not both"));
        }
        // A send while the session is not ready answers 409 before anything is looked up (spec).
        self.check_session(session_id).await?;
        self.sessions.ready_engine(session_id)?;
        let row = match (id, name) {
            (Some(id), _) => template_store::get(&self.db, session_id, id)
                .await?
                .ok_or_else(|| not_found(id))?,
            (None, Some(name)) => template_store::find_by_name(&self.db, session_id, name)
                .await?
                .ok_or_else(|| not_found(name))?,
            (None, None) => return Err(bad("templateId or templateName is required")),
        };
        let parts = [
            row.header.as_deref(),
            Some(row.body.as_str()),
            row.footer.as_deref(),
        ];
        // Rows stored before blank parts were dropped, and a header or footer whose variables render to
        // nothing, must not leave blank paragraphs around the body.
        let text: Vec<String> = parts
            .into_iter()
            .flatten()
            .map(|p| v::render(p, &b.vars))
            .filter(|p| !p.trim().is_empty())
            .collect();
        draft::text(SendTextRequest {
            chat_id: b.chat_id,
            text: Some(text.join("\n\n")),
            mentions: b.mentions,
            link_preview: b.link_preview,
            custom_link_preview: None,
            quoted_message_id: b.quoted_message_id,
        })
    }
}
