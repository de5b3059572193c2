//! REST request and response bodies, one file per resource.

pub mod audit;
pub mod automation;
pub mod common;
pub mod keys;
pub mod sessions;
pub mod sim;
pub mod webhooks;
pub mod ws;
