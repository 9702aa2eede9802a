//! The server's integration tests, one binary (one link instead of nine): black-box HTTP
//! through a real socket on SQLite and PostgreSQL, the real binary's CLI, crash safety and
//! several instances on one database.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod agents;
mod app;
mod audit;
mod billing;
mod campaigns;
mod cli;
mod connections;
mod contacts;
mod crash_safety;
mod customers;
mod error_bodies;
mod http;
mod inbox_hardening;
mod input;
mod limits;
mod media;
mod messages;
mod metrics;
mod multi_instance;
mod network_webhook;
mod permissions;
mod simulator_e2e;
mod templates;
mod test_mode;
mod test_mode_routes;
mod timeline;
mod webhooks;
