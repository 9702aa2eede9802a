//! Accepted sends: deciding each message's fate and emitting its status webhooks.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::customers::Target;
use crate::graph::webhook_error;
use crate::magic::REPLY_TEXT;
use crate::model::{Behaviour, MessageRecord, Number};
use crate::state::{OutKind, Sim};
use crate::validate::ValidSend;

/// What a status webhook needs about its message.
struct StatusCtx {
    wamid: String,
    /// `recipient_id`: the phone digits, for sends to a phone.
    recipient_id: Option<String>,
    target: Target,
    biz: Option<String>,
    category: String,
    /// The network's `pricing` of the message (on `sent` and one of delivered/read).
    pricing: Value,
    conversation_id: String,
    failure: Option<(i64, Option<String>)>,
    number: Number,
}

impl Sim {
    /// Record an accepted message and schedule its status webhooks. Returns the wamid.
    pub fn accept_message(
        self: &Arc<Self>,
        number: &Number,
        send: &ValidSend,
        target: &Target,
        payload: Value,
        forced_failure: Option<(i64, Option<String>)>,
    ) -> String {
        let mut st = self.lock();
        let wamid_user = target.wa_id.as_deref().unwrap_or(&target.user_id);
        let wamid = st.wamid(wamid_user, true);
        let now = st.now_secs();
        let behaviour = target.behaviour;
        let window_open = st.window_open(&number.id, &target.key);

        // Decide the async outcome, most specific first.
        let failure: Option<(i64, Option<String>)> = if let Some(f) = forced_failure {
            Some(f)
        } else if behaviour == Behaviour::NotOnWhatsapp {
            Some((131026, Some("Message Undeliverable.".into())))
        } else if behaviour == Behaviour::Fail {
            Some((target.fail_code.unwrap_or(131000), None))
        } else if !send.is_template() && !window_open && !self.args.no_window {
            Some((
                131047,
                Some(
                    "Message failed to send because more than 24 hours have passed since the \
                     customer last replied to this number."
                        .into(),
                ),
            ))
        } else if send
            .reaction_target
            .as_deref()
            .is_some_and(|t| !st.wamid_known(t))
        {
            Some((
                131009,
                Some("The message you are reacting to does not exist.".into()),
            ))
        } else {
            // unknown, deleted and expired ids alike (the network cannot tell them apart)
            send.media_id
                .as_deref()
                .filter(|m| st.live_media(m).is_none())
                .map(|m| {
                    (
                        131053,
                        Some(format!("Media id {m} was not found or has expired.")),
                    )
                })
        };

        let mut plan: Vec<&'static str> = match (&failure, behaviour) {
            (Some(_), _) => vec!["failed"],
            _ if send.message_type == "reaction" => vec!["sent"],
            (None, Behaviour::NeverDelivers) => vec!["sent"],
            (None, Behaviour::NeverReads) => vec!["sent", "delivered"],
            _ if send.voice => vec!["sent", "delivered", "read", "played"],
            _ => vec!["sent", "delivered", "read"],
        };
        let outcome = match &failure {
            Some((code, _)) => format!("failed:{code}"),
            None => plan.last().copied().unwrap_or("sent").to_owned(),
        };
        if plan.len() > 1 && st.random_bool(self.args.out_of_order) {
            st.shuffle(&mut plan);
        }
        let conversation_id = st.random_hex_upper(16).to_lowercase();
        st.messages.push(MessageRecord {
            wamid: wamid.clone(),
            phone_number_id: number.id.clone(),
            to: send.to.clone(),
            wa_id: target.wa_id.clone().unwrap_or_default(),
            recipient: send.recipient.clone(),
            user_id: Some(target.user_id.clone()),
            message_type: send.message_type.clone(),
            biz_opaque_callback_data: send.biz_opaque_callback_data.clone(),
            accepted_at: now,
            outcome,
            statuses: Vec::new(),
            status_at_ms: Vec::new(),
            payload,
        });
        drop(st);

        let ctx = StatusCtx {
            wamid: wamid.clone(),
            recipient_id: send.recipient.is_none().then(|| send.wa_id.clone()),
            target: target.clone(),
            biz: send.biz_opaque_callback_data.clone(),
            category: send.category.clone(),
            pricing: crate::pricing::pricing(&send.category, window_open, now),
            conversation_id,
            failure,
            number: number.clone(),
        };
        let delays = [
            self.args.sent_delay_ms,
            self.args.delivered_delay_ms,
            self.args.read_delay_ms,
            self.args.read_delay_ms,
        ];
        let replies = behaviour == Behaviour::Replies && plan.contains(&"read");
        let sim = Arc::clone(self);
        self.spawn(async move {
            let mut priced = false;
            for (i, status) in plan.into_iter().enumerate() {
                let d = delays.get(i).copied().unwrap_or(0);
                if d > 0 {
                    tokio::time::sleep(Duration::from_millis(d)).await;
                }
                // pricing on `sent` (or `failed`) and on the first of delivered/read
                let with_pricing = match status {
                    "sent" | "failed" => true,
                    "delivered" | "read" if !priced => {
                        priced = true;
                        true
                    }
                    _ => false,
                };
                sim.emit_status(&ctx, status, with_pricing);
            }
            if replies {
                tokio::time::sleep(Duration::from_millis(sim.args.read_delay_ms)).await;
                sim.reply_thanks(&ctx);
            }
        });
        wamid
    }

    /// The replying customer's answer once the message is read: a plain text, sent through
    /// the inbound injection like any customer message (it opens the window).
    fn reply_thanks(&self, ctx: &StatusCtx) {
        let t = &ctx.target;
        if !self.lock().take_auto_reply(&ctx.number.id, &t.key) {
            tracing::debug!(wamid = %ctx.wamid, "magic reply skipped: answered less than a minute ago");
            return;
        }
        let mut body = json!({
            "phone_number_id": ctx.number.id,
            "type": "text",
            "text": {"body": REPLY_TEXT},
        });
        match &t.wa_id {
            Some(p) => body["from"] = json!(p),
            None => body["from_user_id"] = json!(t.user_id),
        }
        if let Err(e) = self.inject_inbound(body) {
            // e.g. the number was removed by a reset meanwhile
            tracing::debug!(error = %e, "magic reply not sent");
        }
    }

    fn emit_status(&self, ctx: &StatusCtx, status: &str, with_pricing: bool) {
        let mut st = self.lock();
        let now = st.now_secs();
        let failed = status == "failed";
        let mut v = json!({
            "id": ctx.wamid,
            "status": status,
            "timestamp": now.to_string(),
        });
        if let Some(p) = &ctx.recipient_id {
            v["recipient_id"] = json!(p);
        }
        // A failed send to a phone carries no BSUID (the user may not be on WhatsApp at all).
        let t = &ctx.target;
        if !failed || t.to_bsuid {
            v["recipient_user_id"] = json!(t.user_id);
            if let Some(p) = &t.parent_user_id {
                v["recipient_parent_user_id"] = json!(p);
            }
        }
        if let Some(b) = &ctx.biz {
            v["biz_opaque_callback_data"] = json!(b);
        }
        if failed {
            let (code, details) = ctx.failure.clone().unwrap_or((131000, None));
            v["errors"] = json!([webhook_error(code, details.as_deref())]);
        } else {
            let mut conv = json!({
                "id": ctx.conversation_id,
                "origin": {"type": ctx.category},
            });
            if status == "sent" {
                conv["expiration_timestamp"] = json!((now + 24 * 3600).to_string());
            }
            v["conversation"] = conv;
        }
        if with_pricing && !failed {
            v["pricing"] = ctx.pricing.clone();
        }
        // Failed statuses come without `contacts[]`; the username only on delivered/read.
        let contact = (!failed).then(|| {
            let mut c = json!({"user_id": t.user_id});
            if let Some(p) = &t.wa_id {
                c["wa_id"] = json!(p);
            }
            if let Some(p) = &t.parent_user_id {
                c["parent_user_id"] = json!(p);
            }
            if let Some(u) = &t.username
                && matches!(status, "delivered" | "read")
            {
                c["profile"] = json!({"username": u});
            }
            c
        });
        if let Some(m) = st.messages.iter_mut().rev().find(|m| m.wamid == ctx.wamid) {
            m.statuses.push(status.to_owned());
            m.status_at_ms.push(crate::state::unix_now_ms());
        }
        drop(st);
        self.queue(&ctx.number, OutKind::Status { status: v, contact });
    }
}
