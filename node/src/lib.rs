//! wagate API node (skeleton; the Foundation issue fills it in).

pub(crate) mod engine;
pub(crate) mod sessions;
