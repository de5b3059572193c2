//! REST request and response bodies, one file per resource.

pub mod audit;
pub mod bulk;
pub mod common;
pub mod infra;
pub mod keys;
pub mod messages;
pub mod sessions;
pub mod sim;
pub mod templates;
