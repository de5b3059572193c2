//! Header names fixed by the wire notes: towards webhook receivers and between cluster nodes.

pub const WEBHOOK_EVENT: &str = "x-wagate-event";
pub const WEBHOOK_IDEMPOTENCY_KEY: &str = "x-wagate-idempotency-key";
pub const WEBHOOK_DELIVERY_ID: &str = "x-wagate-delivery-id";
pub const WEBHOOK_RETRY_COUNT: &str = "x-wagate-retry-count";
pub const WEBHOOK_SIGNATURE: &str = "x-wagate-signature";
/// Set on a request one node forwards to the session's owner; its value is the forwarding node's id.
pub const FORWARDED: &str = "x-wagate-forwarded";
/// Set on every session-scoped response; names the node that served it.
pub const SERVED_BY: &str = "x-wagate-served-by";

/// The `User-Agent` of webhook deliveries.
pub fn webhook_user_agent() -> String {
    format!("wagate-webhook/{}", crate::VERSION)
}
