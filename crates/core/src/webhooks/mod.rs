//! Event webhooks: what Tern pushes to customers' receivers (issue 14, in progress).
//!
//! | part | where |
//! |---|---|
//! | event types, body, signing, retry schedule, subscription bodies | `tern_domain::events` |
//! | subscriptions: create (plan limit), change, rotate, delete | [`subscriptions`] |
//! | one signed delivery attempt | [`send`] |

pub mod send;
pub mod subscriptions;
