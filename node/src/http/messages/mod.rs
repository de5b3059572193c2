//! Message routes: sends (`send.rs`), operations on messages (`actions.rs`), reads from the message store
//! (`reads.rs`), bulk batches (`bulk.rs`), and the `Idempotency-Key` replay helper (`idem.rs`).

use utoipa_axum::router::OpenApiRouter;

use crate::app::ApiContext;

mod actions;
mod bulk;
mod idem;
mod reads;
mod send;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .merge(send::router())
        .merge(actions::router())
        .merge(bulk::router())
        .merge(reads::router())
}
