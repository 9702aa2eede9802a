//! Signed webhook delivery to the callback URL.
//!
//! Events (statuses, inbound messages, template updates) arrive on a channel. The dispatcher
//! optionally collects them for `batch_window_ms`, groups them the way the network does
//! (`entry` per WABA, `changes[].value` per phone number), serialises with non-ASCII escaped
//! as `\uXXXX`, signs the exact bytes and POSTs them concurrently. A POST that does not get
//! `200` is retried with exponential backoff, up to `webhook_max_attempts`. Chaos: a batch may
//! be shuffled (`out_of_order`) and a POST may be delivered twice (`duplicate`).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tern_cloudapi::{SIGNATURE_HEADER, sign};
use tokio::sync::mpsc;

use crate::model::DeliveryRecord;
use crate::state::{CtlError, OutKind, Outgoing, Sim, unix_now_ms};

const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub async fn run_dispatcher(sim: Arc<Sim>, mut rx: mpsc::UnboundedReceiver<Outgoing>) {
    let mut stop = sim.shutdown.clone();
    let window = Duration::from_millis(sim.args.batch_window_ms);
    loop {
        let first = tokio::select! {
            ev = rx.recv() => match ev {
                Some(e) => e,
                None => break,
            },
            _ = stop.wait_for(|s| *s) => break,
        };
        let mut batch = vec![first];
        if !window.is_zero() {
            let deadline = tokio::time::Instant::now() + window;
            while batch.len() < sim.args.batch_max {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(e)) => batch.push(e),
                    _ => break,
                }
            }
        }
        let (post_id, duplicate, now) = {
            let mut st = sim.lock();
            if batch.len() > 1 && st.random_bool(sim.args.out_of_order) {
                st.shuffle(&mut batch);
            }
            (
                st.next_seq(),
                st.random_bool(sim.args.duplicate),
                st.now_secs(),
            )
        };
        let body = envelope(&batch, now);
        let bytes = ascii_json(&body).into_bytes();
        let s = Arc::clone(&sim);
        let b = bytes.clone();
        sim.spawn(async move { deliver(s, b, post_id, false).await });
        if duplicate {
            let s = Arc::clone(&sim);
            sim.spawn(async move { deliver(s, bytes, post_id, true).await });
        }
    }
}

/// Build the `whatsapp_business_account` envelope for a batch, preserving event order.
pub fn envelope(batch: &[Outgoing], now: i64) -> Value {
    let mut entries: Vec<(String, Vec<Value>)> = Vec::new();
    // per (waba, pnid, kind) change index, so a batch yields one value per number and kind
    let mut slots: Vec<(String, String, &'static str, usize)> = Vec::new();
    for ev in batch {
        let idx = match entries.iter().position(|(w, _)| *w == ev.waba_id) {
            Some(i) => i,
            None => {
                entries.push((ev.waba_id.clone(), Vec::new()));
                entries.len() - 1
            }
        };
        let Some((_, changes)) = entries.get_mut(idx) else {
            continue;
        };
        let (kind, item, contact) = match &ev.kind {
            OutKind::Field { field, value } => {
                changes.push(json!({"field": field, "value": value}));
                continue;
            }
            OutKind::Status { status, contact } => ("statuses", status, contact.as_ref()),
            OutKind::Inbound { message, contact } => ("messages", message, contact.as_ref()),
        };
        let slot = slots
            .iter()
            .find(|(w, p, k, _)| *w == ev.waba_id && *p == ev.phone_number_id && *k == kind)
            .map(|s| s.3);
        let ci = match slot {
            Some(ci) => ci,
            None => {
                changes.push(json!({"field": "messages", "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {
                        "display_phone_number": ev.display_digits,
                        "phone_number_id": ev.phone_number_id,
                    },
                }}));
                let ci = changes.len() - 1;
                slots.push((ev.waba_id.clone(), ev.phone_number_id.clone(), kind, ci));
                ci
            }
        };
        let Some(value) = changes.get_mut(ci).and_then(|c| c.get_mut("value")) else {
            continue;
        };
        push_array(value, kind, item.clone());
        // one `contacts[]` entry per user (by BSUID) and value
        if let Some(contact) = contact {
            let known = value
                .get("contacts")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.get("user_id") == contact.get("user_id"))
                });
            if !known {
                push_array(value, "contacts", contact.clone());
            }
        }
    }
    let entry: Vec<Value> = entries
        .into_iter()
        .map(|(waba, changes)| {
            // per-WABA events (templates) carry the entry's `time`
            let has_field_event = changes.iter().any(|c| c["field"] != "messages");
            let mut e = json!({"id": waba, "changes": changes});
            if has_field_event {
                e["time"] = json!(now);
            }
            e
        })
        .collect();
    json!({"object": "whatsapp_business_account", "entry": entry})
}

fn push_array(value: &mut Value, key: &str, item: Value) {
    match value.get_mut(key).and_then(Value::as_array_mut) {
        Some(a) => a.push(item),
        None => value[key] = json!([item]),
    }
}

/// Serialise with every non-ASCII character escaped as lowercase `\uXXXX` (the network's
/// format; receivers must verify the signature over these exact bytes).
pub fn ascii_json(v: &Value) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    out
}

async fn deliver(sim: Arc<Sim>, body: Vec<u8>, post_id: u64, duplicate: bool) {
    let signature = sign(sim.args.app_secret.as_bytes(), &body);
    let body_value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let max = sim.args.webhook_max_attempts.max(1);
    for attempt in 1..=max {
        let url = sim.callback();
        let (status, error) = match &url {
            None => (None, Some("no callback URL configured".to_owned())),
            Some(u) => match sim
                .http
                .post(u)
                .header("content-type", "application/json")
                .header(SIGNATURE_HEADER, &signature)
                .body(body.clone())
                .send()
                .await
            {
                Ok(r) => (Some(r.status().as_u16()), None),
                Err(e) => (None, Some(e.to_string())),
            },
        };
        {
            let mut st = sim.lock();
            let seq = st.next_seq();
            st.deliveries.push(DeliveryRecord {
                seq,
                post_id,
                attempt,
                duplicate,
                url: url.clone(),
                at_ms: unix_now_ms(),
                body: body_value.clone(),
                signature: signature.clone(),
                response_status: status,
                error: error.clone(),
            });
        }
        if status == Some(200) {
            return;
        }
        tracing::debug!(post_id, attempt, ?status, ?error, "webhook delivery failed");
        if attempt < max {
            let factor = 2u32.saturating_pow(attempt - 1);
            let delay = Duration::from_millis(sim.args.webhook_retry_base_ms)
                .saturating_mul(factor)
                .min(MAX_BACKOFF);
            tokio::time::sleep(delay).await;
        }
    }
    tracing::warn!(post_id, "webhook dropped after {max} attempts");
}

/// The `hub.challenge` handshake against the current callback URL.
pub async fn verify_callback(sim: &Sim, verify_token: Option<&str>) -> Result<Value, CtlError> {
    let url = sim
        .callback()
        .ok_or_else(|| CtlError::bad_request("no callback URL configured"))?;
    let token = verify_token
        .map(str::to_owned)
        .or_else(|| sim.args.verify_token.clone())
        .ok_or_else(|| CtlError::bad_request("no verify token configured"))?;
    let challenge = {
        let mut st = sim.lock();
        st.fbtrace_id()
    };
    let mut u = reqwest::Url::parse(&url).map_err(|e| CtlError::bad_request(e.to_string()))?;
    u.query_pairs_mut()
        .append_pair("hub.mode", "subscribe")
        .append_pair("hub.challenge", &challenge)
        .append_pair("hub.verify_token", &token);
    let (status, body) = match sim.http.get(u).send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            (Some(status), r.text().await.unwrap_or_default())
        }
        Err(e) => (None, e.to_string()),
    };
    let ok = status == Some(200) && body == challenge;
    Ok(json!({"verified": ok, "status": status, "challenge": challenge, "body": body}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::OutKind;

    #[test]
    fn ascii_escaping() {
        let v = json!({"t": "café 😀", "n": 1});
        let s = ascii_json(&v);
        assert!(s.is_ascii());
        assert!(s.contains("caf\\u00e9 \\ud83d\\ude00"));
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn envelope_groups_by_waba_and_number() {
        let ev = |waba: &str, pnid: &str, kind: OutKind| Outgoing {
            waba_id: waba.into(),
            phone_number_id: pnid.into(),
            display_digits: "1555".into(),
            kind,
        };
        let status = |id: &str, contact: Option<Value>| OutKind::Status {
            status: json!({"id": id}),
            contact,
        };
        let batch = vec![
            ev("w1", "p1", status("a", Some(json!({"user_id": "US.1"})))),
            ev("w1", "p1", status("b", Some(json!({"user_id": "US.1"})))),
            ev("w2", "p2", status("c", None)),
            ev(
                "w1",
                "p1",
                OutKind::Inbound {
                    contact: Some(json!({"wa_id": "1", "user_id": "US.1"})),
                    message: json!({"id": "m"}),
                },
            ),
            ev(
                "w1",
                "",
                OutKind::Field {
                    field: "message_template_status_update",
                    value: json!({"event": "APPROVED"}),
                },
            ),
        ];
        let v = envelope(&batch, 7);
        assert_eq!(v["entry"].as_array().unwrap().len(), 2);
        let w1 = &v["entry"][0];
        assert_eq!(
            w1["changes"][0]["value"]["statuses"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            w1["changes"][0]["value"]["contacts"]
                .as_array()
                .unwrap()
                .len(),
            1,
            "one contact per user"
        );
        assert!(
            v["entry"][1]["changes"][0]["value"]
                .get("contacts")
                .is_none(),
            "no contacts for a failed status"
        );
        assert!(v["entry"][1].get("time").is_none());
        assert_eq!(w1["changes"][1]["value"]["messages"][0]["id"], "m");
        assert_eq!(w1["changes"][1]["value"]["contacts"][0]["wa_id"], "1");
        assert_eq!(w1["changes"][2]["field"], "message_template_status_update");
        assert_eq!(w1["time"], 7);
        assert_eq!(
            v["entry"][1]["changes"][0]["value"]["metadata"]["phone_number_id"],
            "p2"
        );
    }
}
