//! Event webhooks: what Tern pushes to customers' receivers (issue 14, in progress).
//!
//! | part | where |
//! |---|---|
//! | event types, body, signing, retry schedule, subscription bodies | `tern_domain::events` |
//! | one signed delivery attempt | [`send`] |

pub mod send;
