//! The simulated WhatsApp network engine (filled in next).
