//! Event webhooks: what Tern pushes to customers' receivers.
//!
//! | part | where |
//! |---|---|
//! | event types, body, signing, retry schedule, subscription bodies | `tern_domain::events` |
//! | events written with the change they report | [`crate::events`] |
//! | subscriptions: create (plan limit), change, rotate, delete | [`subscriptions`] |
//! | one signed delivery attempt | [`send`] |
//! | a claimed delivery made and decided, test sends, replays | [`deliver`] |
//! | one delivery sent again (the app's Replay) | [`redelivery`] |
//! | the data of test events | [`samples`] |
//! | event streams (`GET /events/stream`) on the same outbox | [`stream`] |
//! | a sample event to every subscription and stream (`tern trigger`) | [`trigger`] |
//! | the delivery workers (claim, lease, batch the records) | `tern_engine::webhooks` |

pub mod deliver;
pub mod redelivery;
pub mod samples;
pub mod send;
pub mod stream;
pub mod subscriptions;
pub mod trigger;

pub use redelivery::{Redelivered, redeliver};
