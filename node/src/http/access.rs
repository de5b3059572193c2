//! The access policy of every route, in one table: the least role a route needs and whether a
//! session-restricted key may call it at all. The `Caller` extractor applies it (and the key's session scope
//! on `{sessionId}` routes) before any other extractor reads the path, query or body, so a caller who may not
//! make a call gets 401 or 403 whatever the input, and 400 only reaches callers who may make it.

use axum::http::Method;
use wagate_proto::Role;

/// What a route asks of the caller's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Access {
    pub role: Role,
    /// Refused (403) to keys restricted to some sessions, whatever their role.
    pub unscoped_only: bool,
}

impl Access {
    const fn role(role: Role) -> Access {
        Access {
            role,
            unscoped_only: false,
        }
    }

    const fn unscoped(role: Role) -> Access {
        Access {
            role,
            unscoped_only: true,
        }
    }
}

/// The access rule of a route, by method and path template (`/api/sessions/{sessionId}/qr`).
///
/// The spec's rule: plain reads need VIEWER, everything that creates or changes state needs OPERATOR, and
/// infrastructure, the delivery-failure log, the audit log, the queue dashboard, key management, statistics
/// and the sim control API need ADMIN. The exceptions are spelled out below.
pub(crate) fn access_for(method: &Method, template: &str) -> Access {
    let session_route = template.strip_prefix("/api/sessions/{sessionId}");
    match template {
        // Any valid key.
        "/api/auth/validate" | "/api/settings" | "/api/ws" => return Access::role(Role::Viewer),
        "/api/audit" | "/api/stats/overview" => return Access::role(Role::Admin),
        "/api/webhooks" => return Access::role(Role::Operator),
        _ => {}
    }
    // Data export and import and the media archives read or replace every session's data, and a drain
    // hands every session of the node over: a key restricted to some sessions may not use them, whatever
    // its role.
    if template.starts_with("/api/auth/api-keys")
        || template.starts_with("/api/admin/")
        || template == "/api/infra/drain"
        || template.starts_with("/api/infra/export-data")
        || template.starts_with("/api/infra/import-data")
        || template.starts_with("/api/infra/storage/")
    {
        return Access::unscoped(Role::Admin);
    }
    if template.starts_with("/api/infra/")
        || template.starts_with("/api/webhooks/delivery-failures")
        || template.starts_with("/api/sim/")
    {
        return Access::role(Role::Admin);
    }
    if let Some(rest) = session_route {
        match rest {
            "/proxy" if method == Method::PATCH => return Access::unscoped(Role::Operator),
            // Credential reads: the QR code and a group's invite code.
            "/qr" | "/groups/{groupId}/invite-code" => return Access::role(Role::Operator),
            _ => {}
        }
        if rest.starts_with("/templates") || rest.starts_with("/automation-rules") {
            return Access::role(Role::Operator);
        }
    }
    if method == Method::GET || method == Method::HEAD {
        Access::role(Role::Viewer)
    } else {
        Access::role(Role::Operator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(method: Method, template: &str) -> Role {
        access_for(&method, template).role
    }

    #[test]
    fn reads_need_viewer_and_writes_operator() {
        assert_eq!(role(Method::GET, "/api/sessions"), Role::Viewer);
        assert_eq!(role(Method::POST, "/api/sessions"), Role::Operator);
        assert_eq!(
            role(Method::POST, "/api/sessions/{sessionId}/messages/send-text"),
            Role::Operator
        );
        assert_eq!(
            role(Method::GET, "/api/sessions/{sessionId}/chats"),
            Role::Viewer
        );
        assert_eq!(role(Method::POST, "/api/auth/validate"), Role::Viewer);
    }

    #[test]
    fn credential_reads_and_operator_resources() {
        assert_eq!(
            role(Method::GET, "/api/sessions/{sessionId}/qr"),
            Role::Operator
        );
        assert_eq!(
            role(
                Method::GET,
                "/api/sessions/{sessionId}/groups/{groupId}/invite-code"
            ),
            Role::Operator
        );
        assert_eq!(
            role(Method::GET, "/api/sessions/{sessionId}/templates/{id}"),
            Role::Operator
        );
        assert_eq!(
            role(Method::GET, "/api/sessions/{sessionId}/automation-rules"),
            Role::Operator
        );
        assert_eq!(role(Method::GET, "/api/webhooks"), Role::Operator);
    }

    #[test]
    fn whole_data_routes_refuse_session_restricted_keys() {
        for template in [
            "/api/infra/export-data",
            "/api/infra/import-data",
            "/api/infra/storage/files/count",
            "/api/infra/storage/export",
            "/api/infra/storage/import",
            "/api/admin/queues",
            "/api/infra/drain",
        ] {
            let access = access_for(&Method::GET, template);
            assert_eq!(access.role, Role::Admin, "{template}");
            assert!(access.unscoped_only, "{template}");
        }
        assert!(!access_for(&Method::GET, "/api/infra/status").unscoped_only);
    }

    #[test]
    fn admin_routes() {
        for (method, template) in [
            (Method::GET, "/api/audit"),
            (Method::GET, "/api/stats/overview"),
            (Method::POST, "/api/infra/drain"),
            (Method::GET, "/api/webhooks/delivery-failures"),
            (Method::POST, "/api/webhooks/delivery-failures/redrive"),
            (Method::GET, "/api/sim/sessions/{sessionId}/outbox"),
            (Method::GET, "/api/auth/api-keys"),
            (Method::DELETE, "/api/auth/api-keys/{id}"),
        ] {
            assert_eq!(role(method.clone(), template), Role::Admin, "{template}");
        }
    }

    #[test]
    fn unscoped_only_routes() {
        assert!(access_for(&Method::GET, "/api/auth/api-keys").unscoped_only);
        assert!(access_for(&Method::PATCH, "/api/sessions/{sessionId}/proxy").unscoped_only);
        assert!(!access_for(&Method::GET, "/api/sessions/{sessionId}/proxy").unscoped_only);
        assert!(!access_for(&Method::GET, "/api/audit").unscoped_only);
    }

    /// Every operation of the document has a rule at least as strict as VIEWER, and no route outside the
    /// listed ADMIN areas needs ADMIN (a table typo must not lock operators out).
    #[test]
    fn every_documented_operation_has_a_sensible_rule() {
        let doc = crate::http::openapi();
        let paths = doc["paths"].as_object().cloned().unwrap_or_default();
        assert!(!paths.is_empty(), "the document has no paths");
        for (path, item) in &paths {
            let path = path.as_str();
            let ops = [
                (Method::GET, item.get("get").is_some()),
                (Method::POST, item.get("post").is_some()),
                (Method::PUT, item.get("put").is_some()),
                (Method::PATCH, item.get("patch").is_some()),
                (Method::DELETE, item.get("delete").is_some()),
            ];
            for (method, present) in ops {
                if !present || path.starts_with("/api/health") || path == "/api/metrics" {
                    continue;
                }
                let access = access_for(&method, path);
                let admin_area = [
                    "/api/auth/api-keys",
                    "/api/audit",
                    "/api/stats/overview",
                    "/api/infra/",
                    "/api/admin/",
                    "/api/webhooks/delivery-failures",
                    "/api/sim/",
                ]
                .iter()
                .any(|p| path.starts_with(p));
                assert_eq!(
                    access.role == Role::Admin,
                    admin_area,
                    "{method} {path}: {access:?}"
                );
            }
        }
    }
}
