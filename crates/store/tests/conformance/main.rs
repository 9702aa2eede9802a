#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Store conformance suite: every `Db` method, run on SQLite and on PostgreSQL.
//!
//! One integration binary (fast linking). Each module invokes
//! [`tern_store::both_backends!`] once with the fixture `TestDb`: every
//! `name => async |db| { … }` becomes `<module>::sqlite::name` (temp-file SQLite) and
//! `<module>::postgres::name` (fresh PG schema, dropped afterwards, even when the body
//! panics). PostgreSQL tests fail, never skip, when the server is unreachable.

mod agents;
mod api_keys;
mod audit;
mod campaigns;
mod connect;
mod contact_fields;
mod contacts;
mod conversations;
mod dispatch;
mod event_streams;
mod events;
mod fixtures;
mod identity;
mod inbound_batch;
mod media;
mod messages;
mod network_inbox;
mod orgs;
mod overview;
mod parity;
mod people;
mod phone_numbers;
mod request_log;
mod settings;
mod tags;
mod templates;
mod test_spaces;
mod timeline;
mod usage;
