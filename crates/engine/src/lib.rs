//! Tern's background work: use cases that run outside a request. Each worker claims rows
//! from the database with leases, so any number of `tern serve` processes can run them.

pub mod dispatch;
pub mod failure;
pub mod housekeeping;
pub mod inbox;
pub mod templates;
