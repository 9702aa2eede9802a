//! Messages: accepting one ([`send`]), one attempt to send it ([`dispatch`]), its status
//! ([`status`], the only writer), and why it failed ([`failure`]).

pub mod dispatch;
pub mod failure;
pub mod send;
pub mod status;

use serde_json::Value;
use tern_domain::message::Direction;
use tern_store::Message;

/// The Message's `content`: an inbound message's as received or last edited (`None` once
/// deleted); an outbound message's is its request's object, as accepted. Outbound content
/// never changes, so it is read from the stored request rather than stored twice.
pub fn content(m: &Message) -> Option<Value> {
    match m.direction {
        Direction::Inbound => m.content.clone(),
        Direction::Outbound => m
            .content
            .clone()
            .or_else(|| tern_cloudapi::send::request_content(&m.request, &m.r#type).cloned()),
    }
}
