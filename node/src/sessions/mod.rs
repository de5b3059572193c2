//! Session lifecycle rules: the pure transition table (`state`) and reconnect timing (`backoff`).
//! The supervisor that applies them to running engines arrives separately; nothing here does I/O.

// The supervisor (a teammate's module) wires these in; until then most items are unused.
#![allow(dead_code)]

pub(crate) mod backoff;
pub(crate) mod state;
