//! REST request and response bodies, one file per resource.

pub mod audit;
pub mod common;
pub mod infra;
pub mod keys;
pub mod sessions;
pub mod sim;
