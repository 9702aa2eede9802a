#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end tests: `tern_cloudapi::CloudApiClient` (and raw HTTP) against the simulator,
//! with a local webhook receiver that verifies every signature. One test binary.

mod agents;
mod common;
mod control;
mod delivery;
mod forced;
mod identity;
mod inbound;
mod magic;
mod media;
mod sends;
mod template_updates;
mod templates;
