//! REST request and response bodies, one file per resource.

pub mod admin;
pub mod audit;
pub mod automation;
pub mod bulk;
pub mod calls;
pub mod channels;
pub mod chats;
pub mod common;
pub mod contacts;
pub mod groups;
pub mod infra;
pub mod infra_status;
pub mod keys;
pub mod labels;
pub mod messages;
pub mod search;
pub mod sessions;
pub mod sim;
pub mod status;
pub mod templates;
pub mod webhooks;
pub mod ws;
