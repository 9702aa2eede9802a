//! The network's template status and category words, mapped to Tern's.

use super::*;

pub fn is_status(s: &str) -> bool {
    STATUSES.contains(&s)
}

/// Tern's status for a status of the network's template API (`APPROVED`, …); `None` for
/// values that do not say whether the template can be sent (e.g. `LIMIT_EXCEEDED`).
pub fn status_from_network(s: &str) -> Option<&'static str> {
    Some(match s.to_ascii_uppercase().as_str() {
        "APPROVED" | "REINSTATED" | "UNARCHIVED" => "approved",
        "PENDING" | "IN_APPEAL" => "pending",
        "REJECTED" => "rejected",
        "PAUSED" => "paused",
        "DISABLED" | "DELETED" | "PENDING_DELETION" | "ARCHIVED" | "LOCKED" => "disabled",
        _ => return None,
    })
}

/// `marketing` for `MARKETING`, …; `None` for an unknown category.
pub fn category_from_network(s: &str) -> Option<&'static str> {
    let lower = s.to_ascii_lowercase();
    CATEGORIES.into_iter().find(|c| *c == lower)
}

/// The network's spelling of a Tern category (`MARKETING`).
pub fn category_to_network(s: &str) -> String {
    s.to_ascii_uppercase()
}

/// A rejection reason as reported by the network, without its "no reason" values.
pub fn rejection_reason_from_network(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|r| !r.is_empty() && !r.eq_ignore_ascii_case("NONE"))
        .map(str::to_string)
}
