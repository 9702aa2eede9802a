//! Message status rules.
//!
//! Statuses only move forward (`accepted < sending < sent < delivered < read`); `failed` is
//! terminal and may follow anything before `read`. Network webhooks arrive late, twice or
//! out of order, so applying one is a decision over the current state, never a blind write:
//! a stale status never moves a message back, but its timestamp still fills the matching
//! `*_at` field when that is empty.

use crate::names::name_enum;

name_enum!(
    /// A message's status: `accepted` … `read` or `failed` (outbound), `received` (inbound).
    Status {
        Accepted = "accepted",
        Sending = "sending",
        Sent = "sent",
        Delivered = "delivered",
        Read = "read",
        Failed = "failed",
        Received = "received",
    }
);

/// Tern's name for the status type where `Status` alone is ambiguous.
pub type MessageStatus = Status;

name_enum!(
    /// Who wrote a message.
    Direction { Inbound = "inbound", Outbound = "outbound" }
);

name_enum!(
    /// A message's `type` as the API shows it: the types Tern sends, and those customers
    /// send that Tern understands. A closed set, so typed clients can switch on it.
    MessageType {
        Text = "text",
        Image = "image",
        Video = "video",
        Audio = "audio",
        Document = "document",
        Sticker = "sticker",
        Location = "location",
        Contacts = "contacts",
        Interactive = "interactive",
        Reaction = "reaction",
        Template = "template",
        /// A customer's tap on a template's quick-reply button.
        Button = "button",
        /// A customer's order from a catalog.
        Order = "order",
        /// A notice from the network (e.g. the customer changed number).
        System = "system",
        /// The customer opened the chat for the first time.
        RequestWelcome = "request_welcome",
        /// A type the network or Tern does not support; `content` keeps what arrived.
        Unsupported = "unsupported",
    }
);

impl MessageType {
    /// The type shown for a stored type name: one the network added after this version
    /// of Tern (kept as stored, with its object in `content`) shows as `unsupported`.
    pub fn shown(stored: &str) -> MessageType {
        MessageType::parse(stored).unwrap_or(MessageType::Unsupported)
    }
}

impl Status {
    /// Still in the dispatch queue's hands (not yet reported by the network).
    pub fn is_queued(self) -> bool {
        matches!(self, Status::Accepted | Status::Sending)
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Read | Status::Failed | Status::Received)
    }

    /// Position on the forward path; `failed` is off the path.
    fn rank(self) -> Option<u8> {
        match self {
            Status::Accepted => Some(0),
            Status::Sending => Some(1),
            Status::Sent => Some(2),
            Status::Delivered => Some(3),
            Status::Read => Some(4),
            Status::Failed | Status::Received => None,
        }
    }
}

/// The timestamps a message carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Times {
    pub sent_at: Option<i64>,
    pub delivered_at: Option<i64>,
    pub read_at: Option<i64>,
    pub failed_at: Option<i64>,
}

/// What applying an incoming status does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The status after the update.
    pub status: Status,
    pub times: Times,
    /// The status itself changed (an event is due).
    pub status_changed: bool,
    /// Anything changed (a write is due).
    pub changed: bool,
}

/// How precise a reported time is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Tern's own clock (the dispatcher's `sent`).
    Millis,
    /// The network's webhooks: whole seconds.
    WholeSecond,
}

/// Applies a status reported at `at` (epoch ms, millisecond precision) to a message in
/// `current` with `times`.
pub fn apply(current: Status, times: Times, incoming: Status, at: i64) -> Outcome {
    apply_with(current, times, incoming, at, Precision::Millis)
}

/// [`apply`] for a time of the given precision. A whole-second time never replaces a more
/// precise time inside the same second (the dispatcher's `sent_at` stays when the network's
/// `sent` names the same second), and it is raised to the earlier steps' times inside that
/// second, so the times stay ordered (`delivered` in the second of a precise `sent` is not
/// before it).
pub fn apply_with(
    current: Status,
    times: Times,
    incoming: Status,
    at: i64,
    precision: Precision,
) -> Outcome {
    let mut t = times;
    let coarse = precision == Precision::WholeSecond;
    let second = at.div_euclid(1000);
    let same_second = |v: i64| coarse && v.div_euclid(1000) == second;
    let earlier_steps: &[Option<i64>] = match incoming {
        Status::Delivered => &[times.sent_at],
        Status::Read => &[times.sent_at, times.delivered_at],
        _ => &[],
    };
    let at = earlier_steps
        .iter()
        .flatten()
        .filter(|v| same_second(**v))
        .fold(at, |a, v| a.max(*v));
    // Delivery reports concern outbound messages only.
    if current == Status::Received || incoming == Status::Received {
        return Outcome {
            status: current,
            times,
            status_changed: false,
            changed: false,
        };
    }
    // The earliest report of a step is its true time, and a later step proves the earlier
    // ones happened no later: so every slot at or below the incoming status takes the
    // minimum. This keeps sent ≤ delivered ≤ read however the webhooks are ordered.
    let earliest = |slot: &mut Option<i64>| {
        *slot = Some(match *slot {
            None => at,
            Some(v) if same_second(v) => v,
            Some(v) => v.min(at),
        });
    };
    let next = match (current.rank(), incoming.rank()) {
        // Terminal: a failed message stays failed (an inbound one has no delivery status);
        // a read message cannot fail.
        (None, _) => current,
        (Some(4), _) => current,
        (Some(_), None) if incoming == Status::Failed => Status::Failed,
        (Some(_), None) => current,
        (Some(c), Some(i)) if i > c => incoming,
        _ => current,
    };
    match incoming {
        Status::Sent => earliest(&mut t.sent_at),
        Status::Delivered => {
            earliest(&mut t.delivered_at);
            earliest(&mut t.sent_at);
        }
        Status::Read => {
            earliest(&mut t.read_at);
            earliest(&mut t.delivered_at);
            earliest(&mut t.sent_at);
        }
        // A failure only counts when it takes effect; a late "failed" after "read" is
        // ignored entirely rather than leaving a contradictory failed_at.
        Status::Failed
            if next == Status::Failed && current != Status::Failed && t.failed_at.is_none() =>
        {
            t.failed_at = Some(at);
        }
        _ => {}
    }
    // Only fill the timestamps the resulting status can have: a `sent` arriving after
    // `failed` records when it was sent, which is true and useful.
    Outcome {
        status: next,
        times: t,
        status_changed: next != current,
        changed: next != current || t != times,
    }
}

/// What the network said a message costs: the `pricing` of its status reports
/// (`billable`, `pricing_model`, `category`, `type`), kept as reported (a value the
/// network adds later passes through unchanged). Tern's own billing prices a send by the
/// organisation's prices, not by this; it tells the business what the network charges.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pricing {
    /// Deprecated by the network (`type` says the same); kept while it sends it.
    pub billable: Option<bool>,
    /// `PMP` (per message) since July 2025; `CBP` before.
    pub pricing_model: Option<String>,
    /// `marketing`, `utility`, `authentication`, `service`, …
    pub category: Option<String>,
    /// `regular`, `free_customer_service` or `free_entry_point`.
    #[serde(rename = "type")]
    pub r#type: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::*;

    #[test]
    fn forward_path() {
        let o = apply(Sending, Times::default(), Sent, 10);
        assert_eq!(o.status, Sent);
        assert_eq!(o.times.sent_at, Some(10));
        assert!(o.status_changed);
        let o = apply(Sent, o.times, Delivered, 20);
        assert_eq!((o.status, o.times.delivered_at), (Delivered, Some(20)));
        let o = apply(Delivered, o.times, Read, 30);
        assert_eq!((o.status, o.times.read_at), (Read, Some(30)));
    }

    #[test]
    fn out_of_order_never_moves_back_but_fills_time() {
        let read = apply(
            Sent,
            Times {
                sent_at: Some(10),
                ..Default::default()
            },
            Read,
            30,
        );
        assert_eq!(read.status, Read);
        // read implies delivered; the late delivered keeps the status and its time stays.
        assert_eq!(read.times.delivered_at, Some(30));
        // A late delivered with an earlier time corrects the implied one, not the status.
        let late = apply(Read, read.times, Delivered, 20);
        assert_eq!(late.status, Read);
        assert_eq!(late.times.delivered_at, Some(20));
        assert!(late.changed && !late.status_changed);
        // The same report again changes nothing.
        assert!(!apply(Read, late.times, Delivered, 20).changed);
        // A late `sent` after `delivered` with no sent_at fills it.
        let o = apply(
            Delivered,
            Times {
                delivered_at: Some(20),
                ..Default::default()
            },
            Sent,
            15,
        );
        assert_eq!(o.status, Delivered);
        assert_eq!(o.times.sent_at, Some(15));
        assert!(o.changed && !o.status_changed);
    }

    #[test]
    fn timeline_stays_ordered() {
        let mut t = Times::default();
        let mut st = Sending;
        for (incoming, at) in [(Read, 30), (Sent, 40), (Delivered, 25), (Sent, 10)] {
            let o = apply(st, t, incoming, at);
            st = o.status;
            t = o.times;
        }
        assert_eq!(st, Read);
        assert_eq!(
            (t.sent_at, t.delivered_at, t.read_at),
            (Some(10), Some(25), Some(30))
        );
    }

    #[test]
    fn duplicates_change_nothing() {
        let t = Times {
            sent_at: Some(10),
            ..Default::default()
        };
        let o = apply(Sent, t, Sent, 99);
        assert!(!o.changed);
        assert_eq!(o.times.sent_at, Some(10));
    }

    #[test]
    fn failed_is_terminal_and_can_follow_sent_or_delivered() {
        for from in [Accepted, Sending, Sent, Delivered] {
            let o = apply(from, Times::default(), Failed, 50);
            assert_eq!(o.status, Failed, "{from:?}");
            assert_eq!(o.times.failed_at, Some(50));
        }
        let o = apply(
            Failed,
            Times {
                failed_at: Some(50),
                ..Default::default()
            },
            Delivered,
            60,
        );
        assert_eq!(o.status, Failed);
        assert!(!o.status_changed);
        // Never after read.
        let o = apply(
            Read,
            Times {
                read_at: Some(5),
                ..Default::default()
            },
            Failed,
            60,
        );
        assert_eq!(o.status, Read);
        assert_eq!(o.times.failed_at, None);
        assert!(!o.changed);
    }

    #[test]
    fn a_whole_second_never_replaces_a_precise_time_in_its_second() {
        use Precision::WholeSecond;
        // The dispatcher recorded sent at .987; the network's `sent` says the same second.
        let sent = Times {
            sent_at: Some(10_987),
            ..Times::default()
        };
        let o = apply_with(Sent, sent, Sent, 10_000, WholeSecond);
        assert!(!o.changed);
        assert_eq!(o.times.sent_at, Some(10_987));
        // `delivered` in that second is not before the precise `sent`.
        let o = apply_with(Sent, sent, Delivered, 10_000, WholeSecond);
        assert_eq!(
            (o.times.sent_at, o.times.delivered_at),
            (Some(10_987), Some(10_987))
        );
        // A whole second earlier than the precise time's second still wins (it is earlier).
        let o = apply_with(Sent, sent, Sent, 9_000, WholeSecond);
        assert_eq!(o.times.sent_at, Some(9_000));
        // A later second changes nothing of the earlier step.
        let o = apply_with(Sent, sent, Delivered, 12_000, WholeSecond);
        assert_eq!(
            (o.times.sent_at, o.times.delivered_at),
            (Some(10_987), Some(12_000))
        );
        // Millisecond reports keep the plain minimum.
        let o = apply(Sent, sent, Sent, 10_000);
        assert_eq!(o.times.sent_at, Some(10_000));
    }

    #[test]
    fn inbound_messages_take_no_delivery_report() {
        let o = apply(Received, Times::default(), Read, 10);
        assert!(!o.changed);
        assert_eq!(o.status, Received);
    }

    #[test]
    fn parse_round_trip() {
        for s in [Accepted, Sending, Sent, Delivered, Read, Failed] {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
        assert_eq!(Status::parse("played"), None);
    }
}
