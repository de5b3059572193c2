//! `BrowserError`: why a browser-engine call or launch failed, in terms the adapter maps to statuses.

/// Why a call into the page (or a launch) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrowserError {
    /// No linked, ready page (never started, still linking, stopped).
    #[error("Session is not connected")]
    NotReady,
    /// The page reloaded and the bridge is being re-injected: retry shortly.
    #[error("WhatsApp Web page is reloading; retry shortly")]
    Reloading,
    /// The page's renderer died; recovery is under way.
    #[error("WhatsApp Web page is not responding")]
    PageDead,
    /// The page did not answer within the call budget.
    #[error("WhatsApp Web did not answer in time")]
    Timeout,
    /// Chromium could not be started (missing binary, crash at launch, profile locked).
    #[error("browser launch failed: {0}")]
    Launch(String),
    /// The facade answered with an error code (`not_found`, `bad_input`, `rejected`, `unsupported`, ...).
    #[error("{message}")]
    Page { code: String, message: String },
    /// The DevTools connection failed in another way.
    #[error("browser protocol error: {0}")]
    Protocol(String),
}
