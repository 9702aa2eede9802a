//! The `pricing` object of status webhooks (cloud-api reference §3.4 and §6): per-message
//! pricing (`PMP`), by the message's category (a template's, or `service` for a message that
//! is not a template), whether the customer service window is open, and the date (from
//! 2026-10-01 the network charges service messages, and utility templates inside the
//! window, per message). Entry-point windows (click-to-WhatsApp ads) are not simulated, so
//! `free_entry_point` never appears.

use serde_json::{Value, json};

/// 2026-10-01T00:00:00Z: from then service messages and utility templates inside the
/// window are charged (reference §6, M-PRICE-NT).
pub const NON_TEMPLATE_CHARGED_FROM: i64 = 1_790_812_800;

/// The network's pricing of a message of `category` (lowercase: `marketing`, `utility`,
/// `authentication`, `service`, …) sent with the window `window_open`, at `now_secs`.
pub fn pricing(category: &str, window_open: bool, now_secs: i64) -> Value {
    let before_cutover = now_secs < NON_TEMPLATE_CHARGED_FROM;
    let free = match category {
        "service" => before_cutover,
        "utility" => before_cutover && window_open,
        // marketing, authentication (and its international rate): always charged
        _ => false,
    };
    json!({
        "billable": !free,
        "pricing_model": "PMP",
        "category": category,
        "type": if free { "free_customer_service" } else { "regular" },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: i64 = NON_TEMPLATE_CHARGED_FROM - 1;
    const AFTER: i64 = NON_TEMPLATE_CHARGED_FROM;

    fn kind(v: &Value) -> (&str, bool, &str, &str) {
        (
            v["category"].as_str().unwrap(),
            v["billable"].as_bool().unwrap(),
            v["type"].as_str().unwrap(),
            v["pricing_model"].as_str().unwrap(),
        )
    }

    #[test]
    fn templates_are_priced_by_their_category() {
        for at in [BEFORE, AFTER] {
            for window in [false, true] {
                for c in ["marketing", "authentication"] {
                    assert_eq!(kind(&pricing(c, window, at)), (c, true, "regular", "PMP"));
                }
            }
            assert_eq!(
                kind(&pricing("utility", false, at)),
                ("utility", true, "regular", "PMP"),
                "utility outside the window is charged"
            );
        }
    }

    #[test]
    fn the_window_frees_service_and_utility_until_october_2026() {
        let free = |c| (c, false, "free_customer_service", "PMP");
        assert_eq!(kind(&pricing("service", true, BEFORE)), free("service"));
        assert_eq!(kind(&pricing("utility", true, BEFORE)), free("utility"));
        let charged = |c| (c, true, "regular", "PMP");
        assert_eq!(kind(&pricing("service", true, AFTER)), charged("service"));
        assert_eq!(kind(&pricing("utility", true, AFTER)), charged("utility"));
    }
}
