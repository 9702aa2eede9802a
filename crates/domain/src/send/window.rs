//! The 24-hour customer-service window of a send (consent is the addressing rule's, `address`).

use super::*;

use crate::{ErrorCode, Problem};

/// The free-form window: 24 hours after the customer's last message.
pub const WINDOW_MS: i64 = 24 * 60 * 60 * 1000;

// ---- consent and the 24-hour window ------------------------------------------------------------

/// The customer service window of a (contact, business number) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// The customer has never written to the number.
    NeverWritten,
    /// Within 24 hours of the customer's last message.
    Open,
    /// The customer wrote, but more than 24 hours ago.
    Closed,
}

impl WindowState {
    /// The window at `now_ms` given the network's timestamp of the customer's last inbound
    /// message (epoch ms). Open while `now < last + 24 h`.
    pub fn at(last_inbound_ms: Option<i64>, now_ms: i64) -> WindowState {
        match WindowState::expires_at(last_inbound_ms) {
            None => WindowState::NeverWritten,
            Some(end) if now_ms < end => WindowState::Open,
            Some(_) => WindowState::Closed,
        }
    }

    /// When the window opened by the customer's last message (epoch ms) closes; `None`
    /// when they never wrote.
    pub fn expires_at(last_inbound_ms: Option<i64>) -> Option<i64> {
        last_inbound_ms.map(|t| t.saturating_add(WINDOW_MS))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WindowState::NeverWritten => "never_written",
            WindowState::Open => "open",
            WindowState::Closed => "closed",
        }
    }
}

/// Whether a send is business-initiated: anything but a free-form message (any non-template
/// type) inside a window the customer opened. An opt-out refuses exactly these
/// ([`super::address`], the addressing rule).
pub fn business_initiated(kind: Kind, window: WindowState) -> bool {
    kind.is_template() || window != WindowState::Open
}

/// The window rule of a send (DESIGN "Sending rules"): templates go in every window state;
/// free-form messages need an open window (`409 template_required` when the customer never
/// wrote, `409 window_expired` when the window closed). Consent is the addressing rule's
/// ([`super::address`]), checked before this one.
pub fn check_window(kind: Kind, window: WindowState) -> Result<(), Problem> {
    match (kind.is_template(), window) {
        (true, _) | (false, WindowState::Open) => Ok(()),
        (false, WindowState::NeverWritten) => Err(Problem::new(ErrorCode::TemplateRequired)
            .with_message(
                "The customer has never written to this number. Start the conversation with an approved template message (type \"template\").",
            )),
        (false, WindowState::Closed) => Err(Problem::new(ErrorCode::WindowExpired).with_message(
            "The customer's 24-hour window is closed: free-form messages can be sent only within 24 hours of their last message. Send an approved template message (type \"template\") instead.",
        )),
    }
}
