//! What the read-only list pages share (overview, conversations, contacts, templates,
//! usage): keyset positions in the address, query strings, a person's name for a customer,
//! and the words of statuses.

use uuid::Uuid;

/// Rows a list page shows.
pub const PAGE_SIZE: i64 = 50;

/// A keyset position as carried in the address: `{ts}.{id}`. A forged one only moves
/// within this organisation's own rows, so it is not signed.
pub fn parse_position(raw: Option<&str>) -> Option<(i64, Uuid)> {
    let (at, id) = raw?.trim().split_once('.')?;
    Some((at.parse().ok()?, Uuid::parse_str(id).ok()?))
}

/// `{ts}.{id}` of a row, for the next page's link.
pub fn position(ts: i64, id: Uuid) -> String {
    format!("{ts}.{id}")
}

/// `path?name=value&…` of the non-empty pairs (values encoded).
pub fn href(path: &str, pairs: &[(&str, &str)]) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    let mut any = false;
    for (k, v) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
        q.append_pair(k, v);
        any = true;
    }
    if any {
        format!("{path}?{}", q.finish())
    } else {
        path.to_string()
    }
}

/// A query value, trimmed and cut to `max` characters (a filter, never stored).
pub fn cleaned(v: Option<&str>, max: usize) -> String {
    v.unwrap_or_default().trim().chars().take(max).collect()
}

fn nonempty(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

/// How a customer is named: their name, else `+phone`, else `@username`, else their user
/// id, else "Unknown customer".
pub fn customer_name(
    name: Option<&str>,
    wa_id: Option<&str>,
    username: Option<&str>,
    user_id: Option<&str>,
) -> String {
    if let Some(n) = nonempty(name) {
        n.to_string()
    } else if let Some(w) = nonempty(wa_id) {
        format!("+{w}")
    } else if let Some(u) = nonempty(username) {
        format!("@{}", u.trim_start_matches('@'))
    } else if let Some(id) = nonempty(user_id) {
        id.to_string()
    } else {
        "Unknown customer".to_string()
    }
}

/// An amount in minor units as `12.34 USD` (two decimals, the currencies Tern bills in).
pub fn money(minor: i64, currency: &str) -> String {
    let sign = if minor < 0 { "-" } else { "" };
    let abs = minor.unsigned_abs();
    format!("{sign}{}.{:02} {currency}", abs / 100, abs % 100)
}

/// A number with thousands separators: `1,234,567`.
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A message status in words (the API's name stays next to it on the pages).
pub fn status_words(status: &str) -> &'static str {
    match status {
        "accepted" => "Accepted",
        "sending" => "Sending",
        "sent" => "Sent",
        "delivered" => "Delivered",
        "read" => "Read",
        "failed" => "Failed",
        "received" => "Received",
        _ => "Other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_links() {
        let id = Uuid::now_v7();
        assert_eq!(parse_position(Some(&position(12, id))), Some((12, id)));
        assert_eq!(parse_position(Some("x.y")), None);
        assert_eq!(parse_position(None), None);
        assert_eq!(
            href("/app/contacts", &[("q", ""), ("after", "")]),
            "/app/contacts"
        );
        assert_eq!(
            href("/app/contacts", &[("q", "a b&c"), ("after", "1.x")]),
            "/app/contacts?q=a+b%26c&after=1.x"
        );
    }

    #[test]
    fn words_and_numbers() {
        assert_eq!(customer_name(Some(" "), Some("4477"), None, None), "+4477");
        assert_eq!(customer_name(None, None, Some("@ada"), None), "@ada");
        assert_eq!(customer_name(None, None, None, None), "Unknown customer");
        assert_eq!(money(-1234, "USD"), "-12.34 USD");
        assert_eq!(money(5, "EUR"), "0.05 EUR");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(-12), "-12");
        assert_eq!(thousands(100), "100");
    }
}
