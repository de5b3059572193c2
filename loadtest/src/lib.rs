//! wagate load tests and the test harness shared by every crate's integration tests.
//!
//! # Layout
//! - `harness::node`: start a real `wagate` process (temp dir, free port, readiness polling, kill on drop).
//! - `harness::client`: a small JSON client for the REST API.
//! - `harness::receiver`: a loopback webhook receiver that records deliveries and checks signatures.
//! - `harness::pg`: a throwaway PostgreSQL database per test on the loopback server.

pub mod harness;
