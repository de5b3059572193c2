//! The published OpenAPI contract: one pass over the document utoipa generates from the handlers that
//! fills what every operation shares, so no annotation has to repeat it. It declares every `{param}` of a
//! path with a type and description, gives each operation a summary, a description naming the role it
//! needs (also as `x-required-role`), its security (none for health, the metrics token for the scrape,
//! the API key elsewhere) and the error responses it can answer, all referencing the one `ErrorBody`.

use serde_json::{Map, Value, json};

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

/// Who may call an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// No credential (the three health routes; a valid key only adds the version to `/api/health`).
    Public,
    /// `Authorization: Bearer <METRICS_TOKEN>`, not an API key.
    MetricsToken,
    /// Any valid API key, whatever its role.
    AnyKey,
    Viewer,
    Operator,
    Admin,
}

impl Access {
    fn name(self) -> &'static str {
        match self {
            Access::Public => "none",
            Access::MetricsToken => "metrics-token",
            Access::AnyKey => "any",
            Access::Viewer => "viewer",
            Access::Operator => "operator",
            Access::Admin => "admin",
        }
    }
}

/// What an operation needs, for the document: the credential-free and token routes here, the key's role
/// from the one access table the `Caller` extractor enforces (`http/access.rs`), so the document cannot
/// drift from what is enforced.
pub(crate) fn access(method: &str, path: &str) -> Access {
    if path.starts_with("/api/health") {
        return Access::Public;
    }
    if path == "/api/metrics" {
        return Access::MetricsToken;
    }
    if matches!(path, "/api/auth/validate" | "/api/ws" | "/api/settings") {
        return Access::AnyKey;
    }
    let method =
        axum::http::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).unwrap_or_default();
    match crate::http::access::access_for(&method, path).role {
        wagate_proto::Role::Viewer => Access::Viewer,
        wagate_proto::Role::Operator => Access::Operator,
        wagate_proto::Role::Admin => Access::Admin,
    }
}

/// The document as served: utoipa's output with the shared parts filled in.
pub(crate) fn finish(doc: &utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(doc).unwrap_or_else(|_| json!({}));
    let Some(root) = doc.as_object_mut() else {
        return doc;
    };
    root.insert("openapi".into(), json!("3.1.0"));
    root.remove("security");
    let components = object(root, "components");
    add_security_schemes(object(components, "securitySchemes"));
    add_error_responses(object(components, "responses"));
    let schemas = object(components, "schemas");
    schemas.insert("ErrorBody".into(), error_body_schema());
    let paths = object(root, "paths");
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for method in METHODS {
            if let Some(Value::Object(op)) = item.get_mut(method) {
                finish_operation(method, path, op);
            }
        }
    }
    doc
}

fn object<'a>(parent: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = parent.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    match slot {
        Value::Object(map) => map,
        // Replaced by an object just above.
        _ => unreachable!("slot was set to an object"),
    }
}

fn add_security_schemes(schemes: &mut Map<String, Value>) {
    schemes.insert(
        "apiKey".into(),
        json!({"type": "apiKey", "in": "header", "name": "X-API-Key",
            "description": "An API key. `Authorization: Bearer <key>` is accepted as well; X-API-Key wins."}),
    );
    schemes.insert(
        "metricsToken".into(),
        json!({"type": "http", "scheme": "bearer",
            "description": "The METRICS_TOKEN value; the metrics scrape takes no API key."}),
    );
}

/// Every error the service answers has this body.
fn error_body_schema() -> Value {
    json!({
        "type": "object",
        "description": "Every error response: `{statusCode, message, error}`, plus `code` where the spec names one \
            and `retryAfterSeconds` on a coded 429.",
        "required": ["statusCode", "message", "error"],
        "properties": {
            "statusCode": {"type": "integer", "minimum": 100, "maximum": 599,
                "description": "The HTTP status, repeated."},
            "message": {"type": "string", "description": "What went wrong."},
            "error": {"type": "string", "description": "The HTTP reason phrase, e.g. `Bad Request`."},
            "code": {"type": "string", "description": "A machine-readable code where the spec names one: \
                SESSION_NAME_TEARDOWN_PENDING (409), SESSION_STOP_INCOMPLETE and SESSION_LOGOUT_INCOMPLETE (502), \
                SEND_PACING_LIMITED and RATE_LIMITED (429)."},
            "retryAfterSeconds": {"type": "integer", "minimum": 0,
                "description": "Seconds to wait before retrying (coded 429s)."}
        }
    })
}

/// (status, component name, description) of every shared error response.
const ERRORS: [(&str, &str, &str); 13] = [
    ("400", "BadRequest", "Invalid body, parameter or JID."),
    ("401", "Unauthorized", "Missing or invalid credential."),
    (
        "403",
        "Forbidden",
        "The key's role is too low, the session is outside the key's scope, or the network refused the write.",
    ),
    ("404", "NotFound", "Unknown session, resource or route."),
    (
        "409",
        "Conflict",
        "The state does not allow it now (e.g. `Session is not connected`); may carry code SESSION_NAME_TEARDOWN_PENDING.",
    ),
    (
        "413",
        "PayloadTooLarge",
        "The body exceeds BODY_SIZE_LIMIT or the media exceeds MEDIA_DOWNLOAD_MAX_BYTES.",
    ),
    (
        "415",
        "UnsupportedMediaType",
        "A Content-Encoding other than identity, or a body that is not JSON.",
    ),
    (
        "429",
        "TooManyRequests",
        "Rate limited (code RATE_LIMITED) or send pacing refused (code SEND_PACING_LIMITED); see Retry-After.",
    ),
    ("500", "InternalError", "Unhandled error."),
    (
        "501",
        "NotImplemented",
        "Operation not supported by the active engine.",
    ),
    (
        "502",
        "BadGateway",
        "SESSION_STOP_INCOMPLETE, SESSION_LOGOUT_INCOMPLETE, or a forward to the owner node broke.",
    ),
    (
        "503",
        "ServiceUnavailable",
        "A dependency or the engine did not answer in time; retrying is safe.",
    ),
    (
        "504",
        "GatewayTimeout",
        "The engine did not finish starting, or a forward to the owner node timed out.",
    ),
];

fn add_error_responses(responses: &mut Map<String, Value>) {
    for (_, name, description) in ERRORS {
        responses.insert(
            name.into(),
            json!({"description": description,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}),
        );
    }
}

fn error_ref(status: &str) -> Option<Value> {
    ERRORS
        .iter()
        .find(|(s, _, _)| *s == status)
        .map(|(_, name, _)| json!({"$ref": format!("#/components/responses/{name}")}))
}

/// The `{name}` segments of a path template, in order.
pub(crate) fn template_params(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .collect()
}

/// The declared type and meaning of a path parameter, by name (and, for the generic `id`, by route).
fn path_param(path: &str, name: &str) -> (Value, String) {
    let jid = |what: &str| {
        (
            json!({"type": "string", "minLength": 1, "maxLength": 256}),
            what.to_string(),
        )
    };
    match name {
        "sessionId" => (
            json!({"type": "string", "format": "uuid"}),
            "The session's id (UUID) as returned by session create; a name is refused with 400."
                .into(),
        ),
        "chatId" => jid("Chat JID, e.g. `15551234567@c.us` or `123456789-1111@g.us`."),
        "contactId" => {
            jid("Contact JID, e.g. `15551234567@c.us` (digits alone are read as a phone number).")
        }
        "groupId" => jid("Group JID, e.g. `123456789-1111@g.us`."),
        "channelId" => jid("Channel (newsletter) JID, e.g. `123456789@newsletter`."),
        "messageId" => {
            jid("Message id as the network knows it (`waMessageId`) or the stored message id.")
        }
        "number" => (
            json!({"type": "string", "pattern": "^[0-9]{5,20}$"}),
            "Phone number in international form, digits only.".into(),
        ),
        "labelId" => jid("Label id."),
        "productId" => jid("Catalog product id."),
        "callId" => jid("Call id from the call event."),
        "batchId" => jid("Bulk batch id returned by send-bulk."),
        "webhookId" => (
            json!({"type": "string", "format": "uuid"}),
            "Webhook id.".into(),
        ),
        "ruleId" => (
            json!({"type": "string", "format": "uuid"}),
            "Automation rule id.".into(),
        ),
        "id" if path.starts_with("/api/auth/api-keys") => (
            json!({"type": "string", "format": "uuid"}),
            "API key id.".into(),
        ),
        "id" if path.contains("/templates/") => jid("Template id."),
        "id" if path.contains("/status/") && path.ends_with("/{id}") => jid(
            "A contact JID to read that contact's status posts; a status id (`statusId`) to delete one.",
        ),
        "id" if path.contains("/status/") => jid("Status id (`statusId`) from a status post."),
        other => jid(&format!("The `{other}` of the resource.")),
    }
}

fn finish_operation(method: &str, path: &str, op: &mut Map<String, Value>) {
    let access = access(method, path);
    declare_path_params(path, op);
    describe(method, path, access, op);
    op.insert("x-required-role".into(), json!(access.name()));
    op.insert(
        "security".into(),
        match access {
            Access::Public => json!([]),
            Access::MetricsToken => json!([{"metricsToken": []}]),
            _ => json!([{"apiKey": []}]),
        },
    );
    if let Some(Value::Object(body)) = op.get_mut("requestBody") {
        body.entry("required").or_insert(json!(true));
        body.entry("description")
            .or_insert(json!("JSON body; unknown fields are ignored."));
    }
    let has_body = op.contains_key("requestBody");
    let has_params = op
        .get("parameters")
        .and_then(Value::as_array)
        .is_some_and(|p| !p.is_empty());
    let responses = object(op, "responses");
    for (status, response) in responses.iter_mut() {
        finish_response(status, response);
    }
    for status in error_statuses(access, path, has_body, has_params) {
        if let Some(reference) = error_ref(status) {
            responses.entry(status).or_insert(reference);
        }
    }
}

/// Declares every `{name}` of the path where it lives, and moves nothing that is not in the path there.
fn declare_path_params(path: &str, op: &mut Map<String, Value>) {
    let params = op.entry("parameters").or_insert_with(|| json!([]));
    let Some(params) = params.as_array_mut() else {
        return;
    };
    for name in template_params(path) {
        let (schema, description) = path_param(path, name);
        let existing = params.iter_mut().find(|p| {
            p.get("name").and_then(Value::as_str) == Some(name)
                && p.get("in").and_then(Value::as_str) == Some("path")
        });
        match existing.and_then(Value::as_object_mut) {
            Some(p) => {
                p.insert("required".into(), json!(true));
                p.insert("schema".into(), schema);
                p.entry("description").or_insert(json!(description));
            }
            None => params.push(json!({"name": name, "in": "path", "required": true,
                "description": description, "schema": schema})),
        }
    }
    for p in params.iter_mut().filter_map(Value::as_object_mut) {
        if !p.contains_key("description") {
            let name = p.get("name").and_then(Value::as_str).unwrap_or("value");
            let text = format!("The `{name}` filter.");
            p.insert("description".into(), json!(text));
        }
    }
    if params.is_empty() {
        op.remove("parameters");
    }
}

/// A summary from the handler's name where its doc comment only repeats the route, and a description
/// that names the role.
fn describe(method: &str, path: &str, access: Access, op: &mut Map<String, Value>) {
    let route_line = format!("{} {}", method.to_uppercase(), path);
    let summary = op
        .get("summary")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && *s != route_line)
        .map(str::to_string)
        .unwrap_or_else(|| {
            let id = op
                .get("operationId")
                .and_then(Value::as_str)
                .unwrap_or("operation");
            humanize(id)
        });
    let mut description = op
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty() && *d != route_line)
        .map(|d| format!("{d}\n\n"))
        .unwrap_or_else(|| format!("{summary}.\n\n"));
    description.push_str(&match access {
        Access::Public => "No API key needed.".to_string(),
        Access::MetricsToken => {
            "Gated by `Authorization: Bearer <METRICS_TOKEN>`, not by an API key; 404 while no token is configured.".to_string()
        }
        Access::AnyKey => "Any valid API key (role `viewer` or above).".to_string(),
        role => format!("Required role: `{}` or above.", role.name()),
    });
    if path.starts_with("/api/sessions/{sessionId}") {
        description.push_str(
            " A session-restricted key may only address its own sessions (403 otherwise).",
        );
    }
    op.insert("summary".into(), json!(summary));
    op.insert("description".into(), json!(description));
    if !op.contains_key("tags") {
        let tag = path.split('/').nth(2).unwrap_or("api");
        op.insert("tags".into(), json!([tag]));
    }
}

fn humanize(operation_id: &str) -> String {
    let words = operation_id.replace('_', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => words,
    }
}

fn finish_response(status: &str, response: &mut Value) {
    let Some(r) = response.as_object_mut() else {
        return;
    };
    if r.contains_key("$ref") {
        return;
    }
    let is_error = status.starts_with('4') || status.starts_with('5');
    let empty = r
        .get("content")
        .and_then(Value::as_object)
        .is_none_or(|c| c.is_empty());
    if is_error && empty {
        if let Some(reference) = error_ref(status) {
            *response = reference;
            return;
        }
        r.insert(
            "content".into(),
            json!({"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}),
        );
    }
    if r.get("description")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let reason = status
            .parse::<u16>()
            .ok()
            .and_then(|s| axum::http::StatusCode::from_u16(s).ok())
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Response");
        r.insert("description".into(), json!(reason));
    }
    // Plain text and raw media are typed as what they are on the wire: a string, or bytes of their type.
    if let Some(Value::Object(content)) = r.get_mut("content") {
        for (media_type, media) in content.iter_mut() {
            let Some(m) = media.as_object_mut() else {
                continue;
            };
            if media_type.starts_with("text/") {
                m.entry("schema").or_insert(json!({"type": "string"}));
            } else if !media_type.contains("json") {
                m.insert(
                    "schema".into(),
                    json!({"type": "string", "contentMediaType": media_type}),
                );
            }
        }
    }
}

/// The error statuses an operation can answer, from who may call it and what it takes.
fn error_statuses(
    access: Access,
    path: &str,
    has_body: bool,
    has_params: bool,
) -> Vec<&'static str> {
    let mut statuses = Vec::new();
    match access {
        Access::Public => return statuses,
        Access::MetricsToken => return vec!["401", "404"],
        _ => {}
    }
    statuses.extend(["401", "429", "500"]);
    let session_route = path.starts_with("/api/sessions/{sessionId}")
        || path.starts_with("/api/sim/sessions/{sessionId}");
    if access != Access::AnyKey || session_route {
        statuses.push("403");
    }
    if has_body || has_params {
        statuses.push("400");
    }
    if !template_params(path).is_empty() {
        statuses.push("404");
    }
    if has_body {
        statuses.extend(["413", "415"]);
    }
    if session_route {
        statuses.extend(["409", "501", "502", "503", "504"]);
    }
    statuses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operations(doc: &Value) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for method in METHODS {
                if let Some(op) = item.get(method) {
                    out.push((method.to_string(), path.clone(), op.clone()));
                }
            }
        }
        out
    }

    #[test]
    fn every_path_parameter_is_declared_in_the_path_and_nothing_else_is() {
        let doc = crate::http::openapi();
        for (method, path, op) in operations(&doc) {
            let declared: Vec<&str> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "path")
                .filter_map(|p| p["name"].as_str())
                .collect();
            let mut expected = template_params(&path);
            let mut got = declared.clone();
            expected.sort_unstable();
            got.sort_unstable();
            assert_eq!(got, expected, "{method} {path}");
            for p in op["parameters"].as_array().into_iter().flatten() {
                assert!(p["schema"].is_object(), "{method} {path}: {p}");
                assert!(p["description"].is_string(), "{method} {path}: {p}");
            }
        }
    }

    #[test]
    fn every_operation_is_described_secured_and_answers_with_schemas() {
        let doc = crate::http::openapi();
        let ops = operations(&doc);
        assert!(ops.len() > 150, "{} operations", ops.len());
        for (method, path, op) in ops {
            let at = format!("{method} {path}");
            assert!(
                op["summary"].as_str().is_some_and(|s| !s.is_empty()),
                "{at}"
            );
            assert!(
                op["description"].as_str().is_some_and(|s| !s.is_empty()),
                "{at}"
            );
            assert!(op["tags"].as_array().is_some_and(|t| !t.is_empty()), "{at}");
            assert!(op["x-required-role"].is_string(), "{at}");
            let security = op["security"].as_array().expect("security");
            if path.starts_with("/api/health") {
                assert!(security.is_empty(), "{at}");
            } else if path == "/api/metrics" {
                assert_eq!(security[0], json!({"metricsToken": []}), "{at}");
            } else {
                assert_eq!(security[0], json!({"apiKey": []}), "{at}");
            }
            for (status, response) in op["responses"].as_object().expect("responses") {
                if response.get("$ref").is_some() {
                    continue;
                }
                assert!(response["description"].is_string(), "{at} {status}");
                let no_body = matches!(status.as_str(), "101" | "202" | "204");
                if !no_body {
                    assert!(
                        response["content"]
                            .as_object()
                            .is_some_and(|c| c.values().all(|m| m["schema"].is_object())),
                        "{at} {status} has no typed body"
                    );
                }
            }
        }
    }

    #[test]
    fn roles_follow_the_spec() {
        assert_eq!(access("get", "/api/health/ready"), Access::Public);
        assert_eq!(access("get", "/api/metrics"), Access::MetricsToken);
        assert_eq!(
            access("get", "/api/sessions/{sessionId}/chats"),
            Access::Viewer
        );
        assert_eq!(
            access("get", "/api/sessions/{sessionId}/qr"),
            Access::Operator
        );
        assert_eq!(
            access(
                "get",
                "/api/sessions/{sessionId}/groups/{groupId}/invite-code"
            ),
            Access::Operator
        );
        assert_eq!(access("post", "/api/sessions"), Access::Operator);
        assert_eq!(access("get", "/api/auth/api-keys"), Access::Admin);
        assert_eq!(
            access("get", "/api/webhooks/delivery-failures"),
            Access::Admin
        );
        assert_eq!(access("post", "/api/auth/validate"), Access::AnyKey);
    }
}
