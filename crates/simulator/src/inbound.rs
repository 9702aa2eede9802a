//! Injected customer messages (`POST /_sim/inbound`): the network's `messages` webhook with
//! the sender's identity (phone when shown, BSUID, parent BSUID, username).

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::customers::is_bsuid;
use crate::graph::webhook_error;
use crate::media::sample_media;
use crate::model::{MediaOrigin, digits};
use crate::state::{CtlError, Inner, OutKind, Sim};

const MEDIA_TYPES: [&str; 5] = ["image", "video", "audio", "document", "sticker"];

fn take_str(o: &mut Map<String, Value>, k: &str) -> Option<String> {
    o.remove(k).and_then(|v| v.as_str().map(str::to_owned))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_str)
}

/// `edit` and `revoke` must name the original message; an edit carries the new content.
fn check_edit_revoke(obj: &Map<String, Value>, msg_type: &str) -> Result<(), CtlError> {
    let body = Value::Object(obj.clone());
    match msg_type {
        "edit"
            if str_at(&body, &["edit", "original_message_id"]).is_none()
                || str_at(&body, &["edit", "message", "type"]).is_none() =>
        {
            return Err(CtlError::bad_request(
                "edit needs edit.original_message_id and edit.message.type",
            ));
        }
        "revoke" if str_at(&body, &["revoke", "original_message_id"]).is_none() => {
            return Err(CtlError::bad_request(
                "revoke needs revoke.original_message_id",
            ));
        }
        _ => {}
    }
    Ok(())
}

/// Message types a customer can send through [`Sim::inject_customer_message`], each with the
/// object of the same name.
const CUSTOMER_TYPES: [&str; 14] = [
    "text",
    "image",
    "video",
    "audio",
    "document",
    "sticker",
    "location",
    "contacts",
    "interactive",
    "button",
    "reaction",
    "order",
    "edit",
    "revoke",
];

/// The optional string field `k`, or an error naming it when it is not a string.
fn opt_str(o: &Map<String, Value>, k: &str) -> Result<Option<String>, CtlError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(CtlError::bad_request(format!("{k} must be a string"))),
    }
}

/// Check the body of [`Sim::inject_customer_message`] and turn it into the control API's
/// inbound body (sender as `from` / `from_user_id`, the number as `phone_number_id`).
fn customer_message_body(number_id: &str, body: Value) -> Result<Value, CtlError> {
    let Value::Object(mut o) = body else {
        return Err(CtlError::bad_request("the body must be a JSON object"));
    };
    let msg_type = opt_str(&o, "type")?.ok_or_else(|| CtlError::bad_request("type is required"))?;
    if !CUSTOMER_TYPES.contains(&msg_type.as_str()) {
        return Err(CtlError::bad_request(format!(
            "type must be one of {}",
            CUSTOMER_TYPES.join(", ")
        )));
    }
    if let Some(k) = o.keys().find(|k| {
        ![
            "from",
            "user_id",
            "type",
            "profile_name",
            "context",
            &msg_type,
        ]
        .contains(&k.as_str())
    }) {
        return Err(CtlError::bad_request(format!("unknown field {k}")));
    }
    match (opt_str(&o, "from")?, opt_str(&o, "user_id")?) {
        (Some(_), Some(_)) => {
            return Err(CtlError::bad_request("give from or user_id, not both"));
        }
        (None, None) => return Err(CtlError::bad_request("from or user_id is required")),
        (Some(f), None)
            if f.is_empty() || f.len() > 15 || !f.bytes().all(|b| b.is_ascii_digit()) =>
        {
            return Err(CtlError::bad_request(
                "from must be a phone number in digits, country code first (no +, spaces or dashes)",
            ));
        }
        (None, Some(id)) if !is_bsuid(&id) => {
            return Err(CtlError::bad_request(
                "user_id must be a business-scoped user id such as US.1000000000000000001",
            ));
        }
        (_, Some(id)) => {
            o.remove("user_id");
            o.insert("from_user_id".into(), json!(id));
        }
        (Some(_), None) => {}
    }
    opt_str(&o, "profile_name")?;
    let content = o.get(&msg_type);
    let content_ok = match msg_type.as_str() {
        "contacts" => content.is_some_and(|c| c.as_array().is_some_and(|a| !a.is_empty())),
        _ => content.is_some_and(Value::is_object),
    };
    if !content_ok {
        let shape = if msg_type == "contacts" {
            "a non-empty array"
        } else {
            "an object"
        };
        return Err(CtlError::bad_request(format!(
            "{msg_type} is required for type {msg_type} and must be {shape}"
        )));
    }
    if msg_type == "text"
        && str_at(&Value::Object(o.clone()), &["text", "body"]).is_none_or(str::is_empty)
    {
        return Err(CtlError::bad_request("text.body is required"));
    }
    if o.get("context").is_some_and(|c| !c.is_object()) {
        return Err(CtlError::bad_request("context must be an object"));
    }
    o.insert("phone_number_id".into(), json!(number_id));
    Ok(Value::Object(o))
}

/// What an injected message became.
struct Injected {
    wamid: String,
    timestamp: i64,
    from_user_id: String,
}

impl Sim {
    /// A customer message for Tern's `POST /test/inbound` (see
    /// `SimHandle::inject_inbound_to`): validated, then injected as `/_sim/inbound` does.
    pub fn inject_customer_message(
        &self,
        number_id: &str,
        body: Value,
    ) -> Result<String, CtlError> {
        let body = customer_message_body(number_id, body)?;
        self.inject(body).map(|i| i.wamid)
    }

    /// Inject a customer message (control API). `body` is a message object in the network's
    /// shape plus `phone_number_id`, the sender (`from` phone, or `from_user_id` / `username`
    /// for customers whose phone the network withholds), optional `profile_name`,
    /// `timestamp`, `media_base64`. Returns `{wamid, timestamp, from_user_id}`.
    pub fn inject_inbound(&self, body: Value) -> Result<Value, CtlError> {
        let i = self.inject(body)?;
        Ok(json!({
            "wamid": i.wamid,
            "timestamp": i.timestamp.to_string(),
            "from_user_id": i.from_user_id,
        }))
    }

    fn inject(&self, mut body: Value) -> Result<Injected, CtlError> {
        let obj = body
            .as_object_mut()
            .ok_or_else(|| CtlError::bad_request("body must be a JSON object"))?;
        let pnid = take_str(obj, "phone_number_id")
            .ok_or_else(|| CtlError::bad_request("phone_number_id is required"))?;
        let from = take_str(obj, "from").map(|f| digits(&f));
        if from.as_deref() == Some("") {
            return Err(CtlError::bad_request("from must contain digits"));
        }
        let from_user_id = take_str(obj, "from_user_id");
        let username = take_str(obj, "username");
        let profile_name = take_str(obj, "profile_name");
        let media_b64 = take_str(obj, "media_base64");
        let ts_override = obj.remove("timestamp").and_then(|t| match t {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        });
        let msg_type = obj
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| CtlError::bad_request("type is required"))?
            .to_owned();
        check_edit_revoke(obj, &msg_type)?;
        let media_bytes = match media_b64 {
            Some(b) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|_| CtlError::bad_request("media_base64 is not valid base64"))?,
            ),
            None => None,
        };

        let mut st = self.lock();
        let number = st
            .numbers
            .get(&pnid)
            .cloned()
            .ok_or_else(|| CtlError::not_found(format!("unknown number {pnid}")))?;
        let mut customer = st.inbound_customer(
            self.args.seed,
            from.as_deref(),
            from_user_id.as_deref(),
            username.as_deref(),
        )?;
        // A blocked customer cannot write to the number that blocked them.
        if st.is_blocked(&pnid, &customer.key) {
            return Err(CtlError {
                status: 409,
                message: format!("the number {pnid} blocked this customer"),
            });
        }
        let sender = customer.wa_id.clone().unwrap_or(customer.user_id.clone());
        let wamid = st.wamid(&sender, false);
        let ts = ts_override.unwrap_or_else(|| st.now_secs());
        // `from` only when the network shows the phone number
        if let Some(p) = &customer.wa_id {
            obj.insert("from".into(), json!(p));
        }
        obj.insert("from_user_id".into(), json!(customer.user_id));
        if let Some(p) = &customer.parent_user_id {
            obj.insert("from_parent_user_id".into(), json!(p));
        }
        obj.insert("id".into(), json!(wamid));
        obj.insert("timestamp".into(), json!(ts.to_string()));

        if MEDIA_TYPES.contains(&msg_type.as_str()) {
            self.fill_media(&mut st, obj, &msg_type, media_bytes, &wamid, &pnid)?;
        } else if msg_type == "edit"
            && let Some(Value::Object(inner)) =
                obj.get_mut("edit").and_then(|e| e.get_mut("message"))
        {
            let inner_type = inner
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            if MEDIA_TYPES.contains(&inner_type.as_str()) {
                self.fill_media(&mut st, inner, &inner_type, media_bytes, &wamid, &pnid)?;
            }
        }
        if msg_type == "unsupported" && obj.get("errors").is_none() {
            obj.insert(
                "errors".into(),
                json!([webhook_error(
                    131051,
                    Some("Message type is currently not supported.")
                )]),
            );
        }
        if msg_type != "system" {
            st.windows.insert((pnid.clone(), customer.key.clone()), ts);
        }
        st.inbound.push(crate::agents::InboundRecord {
            wamid: wamid.clone(),
            phone_number_id: pnid.clone(),
            key: customer.key.clone(),
            timestamp: ts,
            read_at: None,
            typing_at: None,
        });
        let name = profile_name
            .or_else(|| customer.profile_name.clone())
            .or_else(|| customer.username.clone())
            .unwrap_or_else(|| {
                let s = customer.wa_id.as_deref().unwrap_or(&customer.user_id);
                format!("Customer {}", &s[s.len().saturating_sub(4)..])
            });
        if customer.profile_name.is_none() {
            customer.profile_name = Some(name.clone());
            if let Some(c) = st.customers.get_mut(&customer.key) {
                c.profile_name = Some(name.clone());
            }
        }
        drop(st);
        let contact = customer.inbound_contact(&name);
        self.queue(
            &number,
            OutKind::Inbound {
                contact: Some(contact),
                message: body,
            },
        );
        Ok(Injected {
            wamid,
            timestamp: ts,
            from_user_id: customer.user_id,
        })
    }

    /// Give an inbound media object an id usable with `GET /{media-id}` (unless it has one),
    /// its `sha256` (base64), `url` and `mime_type`.
    fn fill_media(
        &self,
        st: &mut Inner,
        obj: &mut Map<String, Value>,
        kind: &str,
        bytes: Option<Vec<u8>>,
        wamid: &str,
        pnid: &str,
    ) -> Result<(), CtlError> {
        let default_mime = match kind {
            "image" => "image/jpeg",
            "video" => "video/mp4",
            "audio" => "audio/ogg",
            "document" => "application/pdf",
            _ => "image/webp",
        };
        let media = obj.entry(kind.to_owned()).or_insert_with(|| json!({}));
        if !media.is_object() {
            return Err(CtlError::bad_request(format!("{kind} must be an object")));
        }
        let mime = media
            .get("mime_type")
            .and_then(Value::as_str)
            .unwrap_or(default_mime)
            .to_owned();
        if media.get("id").is_none() {
            // without `media_base64`: a small file of the right type (magic number first)
            let bytes = bytes.map(Bytes::from).unwrap_or_else(|| {
                sample_media(&mime, &format!("{kind} {wamid}")).unwrap_or_else(|| {
                    Bytes::from(format!("simulated {kind} {wamid}").into_bytes())
                })
            });
            let sha_b64 = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&bytes));
            let id = st.store_media(Some(pnid), &mime, bytes, MediaOrigin::Inbound);
            media["id"] = json!(id);
            media["sha256"] = json!(sha_b64);
            media["url"] = json!(format!("{}/_media/{id}", self.public_url));
        }
        media["mime_type"] = json!(mime);
        Ok(())
    }
}
