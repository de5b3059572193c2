//! The one HTTP error type. Every failure becomes `{statusCode, message, error}` (+ `code`,
//! `retryAfterSeconds` where the spec names them), and every status decision for a layer's error lives in
//! the `From` impls here. A 5xx logs its cause and answers a generic message.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use wagate_proto::ErrorBody;

use crate::automation::RuleError;
use crate::keys::{KeyError, KeyRefusal};
use crate::store::StoreError;
use crate::webhooks::WebhookError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub code: Option<&'static str>,
    pub retry_after_seconds: Option<u64>,
    /// The request failed before anything reached the network (media conversion unavailable, which the
    /// spec's 503 row names), so its 503 stands even on a route that otherwise never answers 503.
    pub before_network: bool,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            code: None,
            retry_after_seconds: None,
            before_network: false,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::FORBIDDEN, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::CONFLICT, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// An unexpected failure: the cause goes to the log (inside the request span), not to the client.
    pub fn internal(cause: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %cause, "request failed");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal server error")
    }

    /// For the routes the spec says never answer 503 (group, channel and call-link create, the media send
    /// path, status posts): a 503 tells a client that retrying is safe, and these may already have reached
    /// the network, so their unavailability answers 500 with the same message; a failure known to come
    /// before the network (`before_network`) keeps its 503, as the spec's conversion row asks.
    pub fn never_unavailable(mut self) -> ApiError {
        if self.status == StatusCode::SERVICE_UNAVAILABLE && !self.before_network {
            self.status = StatusCode::INTERNAL_SERVER_ERROR;
        }
        self
    }

    fn before_network(mut self) -> ApiError {
        self.before_network = true;
        self
    }

    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u64) -> ApiError {
        let mut err = Self::new(StatusCode::TOO_MANY_REQUESTS, message);
        err.retry_after_seconds = Some(retry_after_seconds);
        err
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            status_code: self.status.as_u16(),
            message: self.message.clone(),
            error: self
                .status
                .canonical_reason()
                .unwrap_or("Error")
                .to_string(),
            code: self.code.map(str::to_string),
            // Coded 429s (pacing, rate limit) also carry retryAfterSeconds; every 429 has Retry-After.
            retry_after_seconds: self.code.and(self.retry_after_seconds),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(secs) = self.retry_after_seconds {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound => ApiError::not_found("Not found"),
            StoreError::Conflict { what } => ApiError::conflict(format!("{what} already exists")),
            StoreError::StaleLease => ApiError::conflict("Session lease is held by another node"),
            // A write raced the session's delete: the unknown session's 404, worded as everywhere else.
            StoreError::SessionGone(id) => crate::sessions::SessionError::NotFound(id).into(),
            other => ApiError::internal(other),
        }
    }
}

/// A request body that stopped arriving while it was read: 408, whichever reader met it.
impl From<super::serve::BodyStalled> for ApiError {
    fn from(stall: super::serve::BodyStalled) -> Self {
        ApiError::new(StatusCode::REQUEST_TIMEOUT, stall.to_string())
    }
}

impl From<KeyRefusal> for ApiError {
    fn from(refusal: KeyRefusal) -> Self {
        match refusal {
            // Not a verdict on the key: this replica cannot tell yet (raft catch-up after a restart).
            KeyRefusal::CatchingUp => ApiError::unavailable(refusal.to_string()),
            _ => ApiError::unauthorized(refusal.to_string()),
        }
    }
}

impl From<KeyError> for ApiError {
    fn from(err: KeyError) -> Self {
        match err {
            KeyError::NotFound => ApiError::not_found("API key not found"),
            KeyError::Invalid(message) => ApiError::bad_request(message),
            KeyError::LastAdmin => ApiError::conflict(err.to_string()),
            KeyError::Unavailable(message) => ApiError::unavailable(message),
            KeyError::Store(store) => store.into(),
        }
    }
}

impl From<crate::engine::EngineError> for ApiError {
    fn from(err: crate::engine::EngineError) -> Self {
        use crate::engine::EngineError as E;
        let message = err.to_string();
        match err {
            E::NotSupported(_) => ApiError::new(StatusCode::NOT_IMPLEMENTED, message),
            E::NotReady | E::Busy(_) => ApiError::conflict(message),
            E::Timeout | E::Network(_) => ApiError::unavailable(message),
            E::Rejected(_) => ApiError::forbidden(message),
            E::NotFound(_) => ApiError::not_found(message),
            E::BadInput(_) => ApiError::bad_request(message),
            E::Internal(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message),
        }
    }
}

impl From<crate::sessions::SessionError> for ApiError {
    fn from(err: crate::sessions::SessionError) -> Self {
        use crate::sessions::SessionError as S;
        let message = err.to_string();
        match err {
            S::NotFound(_) => ApiError::not_found(message),
            S::NameTaken(_)
            | S::NotConnected
            | S::Transition(_)
            | S::NotClustered
            | S::StartInterrupted => ApiError::conflict(message),
            S::BadInput(_) | S::NoQr => ApiError::bad_request(message),
            S::TeardownPending => {
                ApiError::conflict(message).with_code("SESSION_NAME_TEARDOWN_PENDING")
            }
            S::StopIncomplete => {
                ApiError::new(StatusCode::BAD_GATEWAY, message).with_code("SESSION_STOP_INCOMPLETE")
            }
            S::LogoutIncomplete => ApiError::new(StatusCode::BAD_GATEWAY, message)
                .with_code("SESSION_LOGOUT_INCOMPLETE"),
            S::StartTimeout(_) => ApiError::new(StatusCode::GATEWAY_TIMEOUT, message),
            S::Lease(lease) => lease.into(),
            S::Store(store) => store.into(),
            S::Engine(engine) => engine.into(),
        }
    }
}

impl From<crate::cluster::lease::LeaseError> for ApiError {
    fn from(err: crate::cluster::lease::LeaseError) -> Self {
        use crate::cluster::lease::LeaseError as L;
        match err {
            L::HeldElsewhere => ApiError::conflict(err.to_string()),
            L::Draining => ApiError::unavailable(err.to_string()),
            L::Unavailable(cause) => {
                tracing::error!(error = %cause, "session lease store unavailable");
                ApiError::unavailable("Session lease store unavailable")
            }
            L::Store(store) => store.into(),
        }
    }
}

impl From<super::forward::ForwardError> for ApiError {
    fn from(err: super::forward::ForwardError) -> Self {
        use super::forward::ForwardError as F;
        let status = match err {
            F::NotReached => StatusCode::SERVICE_UNAVAILABLE,
            F::TimedOut => StatusCode::GATEWAY_TIMEOUT,
            F::BrokeAfterSend => StatusCode::BAD_GATEWAY,
            F::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        };
        tracing::warn!(error = %err, "forward to the owner node failed");
        ApiError::new(status, err.to_string())
    }
}

impl From<crate::media::MediaError> for ApiError {
    fn from(err: crate::media::MediaError) -> Self {
        crate::messaging::MessagingError::Media(err).into()
    }
}

impl From<crate::messaging::MessagingError> for ApiError {
    fn from(err: crate::messaging::MessagingError) -> Self {
        use crate::media::MediaError as Me;
        use crate::messaging::MessagingError as M;
        let message = err.to_string();
        match err {
            M::BadInput(_) => ApiError::bad_request(message),
            M::NotFound(_) => ApiError::not_found(message),
            M::Unprocessable(_) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message),
            M::Paced {
                retry_after_seconds,
                ..
            } => ApiError::too_many_requests(message, retry_after_seconds)
                .with_code("SEND_PACING_LIMITED"),
            M::Media(Me::TooLarge(_)) => ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message),
            M::Media(Me::BadInput(_) | Me::Blocked(_) | Me::Unreachable(_)) => {
                ApiError::bad_request(message)
            }
            M::Media(Me::Unavailable(_)) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message),
            M::Media(Me::Io(io)) => ApiError::internal(io),
            M::Session(session) => session.into(),
            M::Engine(engine) => engine.into(),
            M::Store(store) => store.into(),
            M::Convert(convert) => convert.into(),
        }
    }
}

impl From<WebhookError> for ApiError {
    fn from(err: WebhookError) -> Self {
        match err {
            WebhookError::Invalid(message) => ApiError::bad_request(message),
            WebhookError::NotFound(_) => ApiError::not_found(err.to_string()),
            WebhookError::Store(store) => store.into(),
        }
    }
}

impl From<RuleError> for ApiError {
    fn from(err: RuleError) -> Self {
        match err {
            RuleError::Invalid(message) => ApiError::bad_request(message),
            RuleError::NotFound(_) => ApiError::not_found(err.to_string()),
            RuleError::Store(store) => store.into(),
        }
    }
}

impl From<crate::admin::AdminError> for ApiError {
    fn from(err: crate::admin::AdminError) -> Self {
        use crate::admin::AdminError;
        match err {
            AdminError::BadRequest(message) => ApiError::bad_request(message),
            AdminError::Conflict(message) => ApiError::conflict(message),
            AdminError::Unavailable(message) => ApiError::unavailable(message),
            AdminError::Store(err) => err.into(),
            AdminError::Internal(cause) => ApiError::internal(cause),
        }
    }
}

impl From<crate::media::convert::ConvertError> for ApiError {
    fn from(err: crate::media::convert::ConvertError) -> Self {
        use crate::media::convert::ConvertError;
        match err {
            ConvertError::Disabled
            | ConvertError::NotRunnable(_)
            | ConvertError::QueueFull
            | ConvertError::TimedOut(_) => ApiError::unavailable(err.to_string()).before_network(),
            ConvertError::OutputTooLarge(_) => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, err.to_string())
            }
            ConvertError::BadInput(_) => ApiError::bad_request(err.to_string()),
            ConvertError::Media(media) => media.into(),
            ConvertError::Io(cause) => ApiError::internal(cause),
        }
    }
}
