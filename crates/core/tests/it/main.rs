#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The use cases against a real database, every test on SQLite and on PostgreSQL.

mod accept;
mod addressing;
mod campaigns;
mod fixtures;
mod inbox;
mod keys;
mod limits;
mod people;
mod request_log;
mod status;
mod usage;
