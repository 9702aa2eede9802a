//! Tern's background loops: claim, lease, pace, back off, wake. Each item is handled by a
//! use case in `tern-core`; the loops are safe with any number of `tern serve` processes
//! (leased claims).

pub mod campaigns;
pub mod dispatch;
pub mod housekeeping;
pub mod inbox;
pub mod media;
pub mod retry;
pub mod templates;
pub mod webhooks;
