//! Message template rules: validation of a draft in the network's component format, Tern's
//! template status (the network's words for it are mapped in `cloudapi`), and the send-path questions asked of a stored
//! template (how many variables, which header, is there a copy-code button, does a send's
//! `variables` / `components` / `coupon_code` fit it, and a ready-to-send example).
//!
//! Variables are positional (`{{1}}`, `{{2}}`, …). As in the network, the header and the
//! body number their variables separately; Tern's `variables` shorthand of POST /messages
//! fills *every* place where a number appears, so a template with `{{1}}` in its header and
//! `{{1}}`, `{{2}}` in its body takes two values.

mod components;
mod draft;
mod draft_buttons;
mod example;
mod send_check;
mod status;

pub use components::*;
pub use draft::*;
use draft_buttons::*;
pub use example::*;
pub use send_check::*;
pub use status::*;

pub const MAX_NAME_CHARS: usize = 512;
/// The component types of a template, each at most once (so at most this many components).
pub const COMPONENT_TYPES: [&str; 4] = ["HEADER", "BODY", "FOOTER", "BUTTONS"];
pub const MAX_HEADER_TEXT_CHARS: usize = 60;
pub const MAX_BODY_CHARS: usize = 1024;
pub const MAX_FOOTER_CHARS: usize = 60;
pub const MAX_BUTTONS: usize = 10;
pub const MAX_QUICK_REPLIES: usize = 10;
pub const MAX_URL_BUTTONS: usize = 2;
pub const MAX_PHONE_BUTTONS: usize = 1;
pub const MAX_COPY_CODE_BUTTONS: usize = 1;
pub const MAX_BUTTON_TEXT_CHARS: usize = 25;
pub const MAX_URL_CHARS: usize = 2000;
pub const MAX_BUTTON_PHONE_CHARS: usize = 20;
pub const MAX_COUPON_CHARS: usize = 20;

pub const HEADER_FORMATS: [&str; 5] = ["TEXT", "IMAGE", "VIDEO", "DOCUMENT", "LOCATION"];

pub const BUTTON_TYPES: [&str; 8] = [
    "QUICK_REPLY",
    "URL",
    "PHONE_NUMBER",
    "COPY_CODE",
    "OTP",
    "FLOW",
    "CATALOG",
    "MPM",
];

/// The `to` of [`example_message`]; POST /messages refuses it until it is replaced.
pub const RECIPIENT_PLACEHOLDER: &str = "+<RECIPIENT_PHONE>";

#[cfg(test)]
mod tests;
