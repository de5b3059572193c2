//! wagate API node (skeleton; the Foundation issue fills it in).
