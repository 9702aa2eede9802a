//! Conversations for agents (APP.md §6, §7): the rules of a read mark and of a block.
//!
//! * A read mark (`POST /messages/{id}/read`) is for a customer's (inbound) message received
//!   in the last 30 days; it also marks the earlier unread messages of the conversation
//!   (the network does the same).
//! * A block (`POST /contacts/{id}/block`) reaches the numbers the customer wrote to in the
//!   last 24 hours: the network blocks only those (the same 24 hours as the service window,
//!   [`crate::send::WindowState`]).

use crate::Problem;
use crate::error::ConflictReason;
use crate::message::Direction;
use crate::send::WindowState;

/// How long after its receipt the network still marks a message read: 30 days.
pub const READ_MAX_AGE_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// Most users the network blocks or unblocks in one request.
pub const BLOCK_MAX_USERS: usize = 1_000;

/// Whether a message of `direction` received at `received_at` (the network's time, epoch
/// ms) can be marked read at `now`: `409 not_inbound` for the business's own message, `409
/// too_old` past 30 days.
pub fn check_read(direction: Direction, received_at: i64, now: i64) -> Result<(), Problem> {
    if direction != Direction::Inbound {
        return Err(Problem::conflict(ConflictReason::NotInbound).with_message(
            "Only a customer's message can be marked read; this one was sent by the business.",
        ));
    }
    if now.saturating_sub(received_at) > READ_MAX_AGE_MS {
        return Err(Problem::conflict(ConflictReason::TooOld)
            .with_message("The network marks a message read only within 30 days of its receipt."));
    }
    Ok(())
}

/// Whether the customer can be blocked at a number they last wrote to at `last_inbound_at`
/// (the network's time): they wrote there in the last 24 hours.
pub fn can_block_at(last_inbound_at: Option<i64>, now: i64) -> bool {
    WindowState::at(last_inbound_at, now) == WindowState::Open
}

/// The refusal of a block when the customer wrote to none of the organisation's numbers in
/// the last 24 hours.
pub fn block_needs_recent_message() -> Problem {
    Problem::conflict(ConflictReason::BlockNeedsRecentMessage).with_message(
        "The network blocks only customers who wrote in the last 24 hours; this customer has not written to any of the organisation's numbers since.",
    )
}

/// The network refused a read mark or a block with its own code and words.
pub fn network_rejected(code: Option<i64>, message: &str) -> Problem {
    Problem::conflict(ConflictReason::NetworkRejected)
        .with_message(format!("The network refused the request: {message}"))
        .with_detail("network_code", code)
        .with_detail("network_message", message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    const DAY: i64 = 24 * 60 * 60 * 1000;
    const NOW: i64 = 1_800_000_000_000;

    fn reason(r: Result<(), Problem>) -> Option<String> {
        r.err()
            .map(|p| p.details["reason"].as_str().unwrap().to_string())
    }

    #[test]
    fn only_recent_inbound_messages_are_marked_read() {
        assert_eq!(reason(check_read(Direction::Inbound, NOW - DAY, NOW)), None);
        assert_eq!(
            reason(check_read(Direction::Inbound, NOW - 30 * DAY, NOW)),
            None
        );
        assert_eq!(
            reason(check_read(Direction::Inbound, NOW - 31 * DAY, NOW)).as_deref(),
            Some("too_old")
        );
        // The business's own message first, whatever its age.
        assert_eq!(
            reason(check_read(Direction::Outbound, NOW - 31 * DAY, NOW)).as_deref(),
            Some("not_inbound")
        );
    }

    #[test]
    fn a_block_needs_a_message_in_the_last_24_hours() {
        assert!(can_block_at(Some(NOW - DAY + 60_000), NOW));
        assert!(!can_block_at(Some(NOW - 25 * DAY / 24), NOW));
        assert!(!can_block_at(None, NOW));
        let p = block_needs_recent_message();
        assert_eq!(p.code, ErrorCode::Conflict);
        assert_eq!(p.details["reason"], "block_needs_recent_message");
    }

    #[test]
    fn a_network_refusal_names_its_code() {
        let p = network_rejected(Some(139100), "Failed to block users");
        assert_eq!(p.details["reason"], "network_rejected");
        assert_eq!(p.details["network_code"], 139100);
        assert_eq!(p.details["network_message"], "Failed to block users");
    }
}
