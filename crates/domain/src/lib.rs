//! Tern's domain layer: the rules of the product, with no I/O.
//!
//! Everything here is plain data and pure functions so it can be unit-tested without a
//! server or a database. The HTTP layer (`tern-api`) and the store (`tern-store`) build on it.

mod names;

pub mod agents;
pub mod auth;
pub mod backoff;
pub mod campaign;
pub mod contact;
pub mod crypto;
pub mod cursor;
pub mod error;
pub mod events;
pub mod failure;
pub mod media;
pub mod message;
pub mod net_guard;
pub mod number;
pub mod people;
pub mod phone;
pub mod plan;
pub mod quota;
pub mod send;
pub mod template;
pub mod text;
pub mod time;
pub mod timeline;
pub mod validate;

pub use error::{ErrorCode, FieldError, Problem};
pub use names::UnknownName;

/// New identifiers are UUID v7: unique, and sortable by creation time, which keeps keyset
/// pagination and B-tree inserts cheap.
pub fn new_id() -> uuid::Uuid {
    uuid::Uuid::now_v7()
}
