//! REST request and response bodies, one file per resource.

pub mod common;
