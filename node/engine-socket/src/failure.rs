//! Library errors classified into what the gateway's error mapping needs to know: the question is
//! never "which variant" but "did the network refuse, not answer, or was it gone". Answers come from the
//! library's own `ErrorChainExt` (timeout, transport, server rejection), so a new library error type
//! is classified without touching this file. The node turns a `Failure` into its `EngineError`.

use std::error::Error as StdError;

use whatsapp_rust::ErrorChainExt;
use whatsapp_rust::features::MexError;

/// What went wrong, in the terms of the gateway's error table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Not paired / logged out: the session is not usable (409).
    NotReady,
    /// The query went out and no answer came in the budget (503).
    Timeout,
    /// The transport was closed or never opened (5xx; never a 4xx, per the spec).
    Network,
    /// The server refused (not authorised, forbidden, conflict): 403.
    Rejected,
    /// The server says the target does not exist: 404.
    NotFound,
    /// The request was malformed (server 400/406 or a library validation): 400.
    BadInput,
    /// Anything else (our own failure, an unexpected answer): 5xx.
    Internal,
}

/// A classified failure with the text to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// Classifies any library error. Transport and timeout checks come first: a closed socket must never
/// surface as a rejection even when a wrapper also names a server code.
pub fn classify<E: StdError + 'static>(err: &E) -> Failure {
    classify_dyn(err)
}

/// `classify` for an error already behind `dyn Error` (e.g. an `anyhow::Error`'s `as_ref()`).
pub fn classify_dyn(err: &(dyn StdError + 'static)) -> Failure {
    let text = innermost_text(err);
    if err.is_transport_unavailable() {
        return Failure::new(
            FailureKind::Network,
            format!("WhatsApp connection is closed: {text}"),
        );
    }
    if err.is_timeout() {
        return Failure::new(FailureKind::Timeout, "The network did not answer in time");
    }
    if let Some(rejection) = err.server_rejection() {
        let kind = kind_of_server_code(rejection.code);
        let detail = if rejection.text.is_empty() {
            format!("WhatsApp refused the request (code {})", rejection.code)
        } else {
            format!(
                "WhatsApp refused the request: {} ({})",
                rejection.text, rejection.code
            )
        };
        return Failure::new(kind, detail);
    }
    if let Some(status) = err.http_status() {
        return Failure::new(
            FailureKind::Network,
            format!("media host answered HTTP {status}"),
        );
    }
    if let Some(text) = graphql_refusal(err) {
        return Failure::new(FailureKind::Rejected, text);
    }
    if mentions_not_logged_in(err) {
        return Failure::new(FailureKind::NotReady, "Session is not connected");
    }
    if is_invalid_request(err) {
        return Failure::new(FailureKind::BadInput, text);
    }
    Failure::new(FailureKind::Internal, text)
}

/// The server's IQ error codes (XMPP style) as the gateway's kinds.
pub fn kind_of_server_code(code: u16) -> FailureKind {
    match code {
        400 | 406 => FailureKind::BadInput,
        404 | 410 => FailureKind::NotFound,
        408 | 504 => FailureKind::Timeout,
        500..=599 => FailureKind::Network,
        // 401 not authorised, 403 forbidden / not admin, 409 conflict, 419 / 429 limits, ...
        _ => FailureKind::Rejected,
    }
}

/// The deepest error's text, with nothing repeated (wrappers render what they wrap).
fn innermost_text(err: &(dyn StdError + 'static)) -> String {
    ErrorChainExt::sources(err)
        .last()
        .map(|e| e.to_string())
        .unwrap_or_else(|| err.to_string())
}

/// A GraphQL (MEX) extension error: the server understood and refused (channel writes).
fn graphql_refusal(err: &(dyn StdError + 'static)) -> Option<String> {
    ErrorChainExt::sources(err).find_map(|e| match e.downcast_ref::<MexError>() {
        Some(MexError::ExtensionError { code, message }) => {
            Some(format!("WhatsApp refused the request: {message} ({code})"))
        }
        _ => None,
    })
}

/// The library spells "not logged in" as its own variant in several enums (`ClientError`,
/// `SendError`, `PollError`); they all render the same sentence.
fn mentions_not_logged_in(err: &(dyn StdError + 'static)) -> bool {
    ErrorChainExt::sources(err).any(|e| e.to_string() == "client is not logged in")
}

/// Each feature spells input validation as its own `InvalidRequest`/`InvalidPoll` variant; their
/// messages share these prefixes (see the module docs of the library's `error`).
fn is_invalid_request(err: &(dyn StdError + 'static)) -> bool {
    ErrorChainExt::sources(err).any(|e| {
        let text = e.to_string();
        ["invalid ", "Invalid "]
            .iter()
            .any(|prefix| text.starts_with(prefix))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use whatsapp_rust::ClientError;
    use whatsapp_rust::features::{AppStateError, GroupError};
    use whatsapp_rust::request::IqError;
    use whatsapp_rust::send::SendError;

    fn server(code: u16, text: &str) -> IqError {
        IqError::ServerError {
            code,
            text: text.into(),
            error_type: None,
            backoff: None,
        }
    }

    #[test]
    fn an_unanswered_query_is_a_timeout() {
        let err = GroupError::Iq(IqError::Timeout);
        assert_eq!(classify(&err).kind, FailureKind::Timeout);
    }

    #[test]
    fn a_closed_transport_is_network_not_a_4xx() {
        for err in [
            SendError::Client(ClientError::NotConnected),
            SendError::Iq(IqError::NotConnected),
            SendError::Iq(IqError::InternalChannelClosed),
        ] {
            assert_eq!(classify(&err).kind, FailureKind::Network, "{err}");
        }
        assert_eq!(
            classify(&GroupError::Iq(IqError::NotConnected)).kind,
            FailureKind::Network
        );
    }

    #[test]
    fn server_codes_map_to_rejected_not_found_and_bad_input() {
        let cases = [
            (403, FailureKind::Rejected),
            (401, FailureKind::Rejected),
            (409, FailureKind::Rejected),
            (404, FailureKind::NotFound),
            (400, FailureKind::BadInput),
            (406, FailureKind::BadInput),
            (503, FailureKind::Network),
        ];
        for (code, kind) in cases {
            let failure = classify(&GroupError::Iq(server(code, "not-authorized")));
            assert_eq!(failure.kind, kind, "code {code}");
            assert!(
                failure.message.contains("not-authorized"),
                "{}",
                failure.message
            );
        }
    }

    #[test]
    fn validation_errors_are_bad_input() {
        let err = SendError::InvalidRequest("message ID must not be empty".into());
        assert_eq!(classify(&err).kind, FailureKind::BadInput);
        let err = AppStateError::InvalidRequest("empty label id".into());
        assert_eq!(classify(&err).kind, FailureKind::BadInput);
        let err = GroupError::InvalidRequest("invalid or empty invite code".into());
        assert_eq!(classify(&err).kind, FailureKind::BadInput);
    }

    #[test]
    fn not_logged_in_is_not_ready() {
        assert_eq!(
            classify(&SendError::NotLoggedIn).kind,
            FailureKind::NotReady
        );
        assert_eq!(
            classify(&SendError::Client(ClientError::NotLoggedIn)).kind,
            FailureKind::NotReady
        );
    }

    #[test]
    fn an_anyhow_wrapped_iq_error_is_still_recognised() {
        let err = AppStateError::Internal(anyhow::Error::new(IqError::Timeout));
        assert_eq!(classify(&err).kind, FailureKind::Timeout);
        let err = AppStateError::Internal(anyhow::Error::new(server(404, "item-not-found")));
        assert_eq!(classify(&err).kind, FailureKind::NotFound);
    }
}
