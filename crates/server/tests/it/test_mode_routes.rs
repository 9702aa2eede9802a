//! Test mode's isolation over every route of the permission table (APP.md §5), on SQLite
//! and PostgreSQL: each key makes one object of every kind in its own mode, then every route
//! that names an object is called with the other mode's object — `404`, exactly as for an id
//! that does not exist — and every list answers without the other mode's objects. References
//! inside bodies (a media id, a template name, a number id) follow the same rule, and a
//! phone number used in one mode is free in the other. A route added to the table is covered
//! here without a line of its own: an answer other than that of a missing id fails.

use crate::common::send;
use crate::network_webhook::{envelope, messages_change, text_message};
use crate::permissions::TABLE;
use crate::test_mode::Modes;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const API: &str = "/api/public/v1";
/// An id no object has (the comparison for "404 alike").
const NOBODY: &str = "0190f0f0-0000-7000-8000-0000000000ff";

/// One mode's key and the objects it made, by the path parameter that names them.
struct Space {
    key: String,
    ids: BTreeMap<&'static str, String>,
    /// The customer who wrote in (digits).
    customer: &'static str,
    /// A phone of a contact made by this mode.
    phone: &'static str,
    template: &'static str,
    number: String,
}

async fn call(m: &Modes, method: &str, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = m
        .app
        .http
        .request(method.clone(), m.app.url(&format!("{API}{path}")))
        .bearer_auth(key);
    if method != reqwest::Method::GET {
        req = req.header("Idempotency-Key", uuid::Uuid::new_v4().to_string());
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let (s, _, b) = send(req).await;
    (s, b)
}

async fn created(m: &Modes, path: &str, key: &str, body: Value) -> Value {
    let (s, b) = call(m, "POST", path, key, Some(body)).await;
    assert!(s == 201 || s == 200, "POST {path}: {s} {b}");
    b
}

/// Makes one object of every kind with `key`.
async fn make(m: &Modes, key: &str, test: bool) -> Space {
    let (customer, phone, template) = if test {
        ("14155550911", "+14155550912", "only_test")
    } else {
        ("447700900911", "+447700900912", "only_live")
    };
    let mut ids = BTreeMap::new();
    let c = created(m, "/contacts", key, json!({"phone": phone, "name": "Iso"})).await;
    ids.insert("contact_id", c["id"].as_str().unwrap().to_string());
    let t = created(
        m,
        "/templates",
        key,
        json!({"name": template, "language": "en_US", "category": "utility",
            "components": [{"type": "BODY", "text": "Hello"}]}),
    )
    .await;
    ids.insert("template_id", t["id"].as_str().unwrap().to_string());
    let (s, _, file) = crate::media::upload(
        &m.app,
        key,
        crate::media::fixture::jpeg(2000),
        Some("image/jpeg"),
        "iso.jpg",
    )
    .await;
    assert_eq!(s, 201, "{file}");
    ids.insert("media_id", file["media_id"].as_str().unwrap().to_string());
    let camp = created(
        m,
        "/campaigns",
        key,
        json!({"name": "Iso", "template": {"name": template, "language": "en_US"},
            "audience": {"all_contacts": true}}),
    )
    .await;
    ids.insert("campaign_id", camp["id"].as_str().unwrap().to_string());
    let hook = created(
        m,
        "/webhook-subscriptions",
        key,
        json!({"url": m.files.url("/hook/204"), "events": ["message.status"]}),
    )
    .await;
    ids.insert("webhook_id", hook["id"].as_str().unwrap().to_string());
    let (_, numbers) = call(m, "GET", "/phone-numbers", key, None).await;
    let number = numbers["data"][0]["id"].as_str().unwrap().to_string();

    // A customer writes in: a conversation and an inbound message.
    if test {
        let hi = json!({"from": customer, "type": "text", "text": {"body": "Hi"}});
        let (s, b) = call(m, "POST", "/test/inbound", key, Some(hi)).await;
        assert_eq!(s, 202, "{b}");
    } else {
        let now = tern_domain::time::now_ms() / 1000;
        let inbound = envelope(vec![messages_change(
            &number,
            vec![json!({"wa_id": customer, "profile": {"name": "Iso"}})],
            vec![text_message("wamid.ISO1", customer, now, "Hi")],
            vec![],
        )]);
        let body = serde_json::to_vec(&inbound).unwrap();
        assert_eq!(m.app.post_network(&body).await.0, 200);
    }
    let convs = m
        .until("/conversations", key, "the customer's conversation", |b| {
            b["data"].as_array().is_some_and(|a| !a.is_empty())
        })
        .await;
    let conv = convs["data"][0]["id"].as_str().unwrap().to_string();
    let msgs = m
        .until(
            &format!("/conversations/{conv}/messages"),
            key,
            "the customer's message",
            |b| b["data"].as_array().is_some_and(|a| !a.is_empty()),
        )
        .await;
    ids.insert("conversation_id", conv);
    ids.insert(
        "message_id",
        msgs["data"][0]["id"].as_str().unwrap().to_string(),
    );
    Space {
        key: key.to_string(),
        ids,
        customer,
        phone,
        template,
        number,
    }
}

/// `path` with its parameters named by `ids` (the tag is a name, not an object).
fn fill(path: &str, ids: &BTreeMap<&'static str, String>) -> String {
    path.split('/')
        .map(
            |seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some("tag") => "vip".to_string(),
                Some(p) => ids
                    .get(p)
                    .unwrap_or_else(|| panic!("no object for {{{p}}}: make one in `make`"))
                    .clone(),
                None => seg.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("/")
}

/// A body the route accepts, so that only the object can be what is missing.
fn body_for(method: &str, path: &str) -> Option<Value> {
    let body = match (method, path) {
        ("GET" | "DELETE", _) => return None,
        ("PATCH", "/contacts/{contact_id}") => json!({"name": "x"}),
        (_, "/contacts/{contact_id}/consent") => json!({"status": "opted_in"}),
        (_, "/contacts/{contact_id}/tags") => json!({"tags": ["vip"]}),
        (_, "/campaigns/{campaign_id}/schedule") => json!({"scheduled_at": "2099-01-01T00:00:00Z"}),
        ("PATCH", "/webhook-subscriptions/{webhook_id}") => json!({"enabled": false}),
        (_, "/webhook-subscriptions/{webhook_id}/replay") => {
            json!({"since": "2020-01-01T00:00:00Z"})
        }
        _ => json!({}),
    };
    Some(body)
}

/// An answer without its request's own id.
fn plain(b: &Value) -> String {
    let mut b = b.clone();
    if let Some(o) = b.as_object_mut() {
        o.remove("request_id");
    }
    b.to_string()
}

fn code(b: &Value) -> Value {
    b["code"].clone()
}

async fn every_route_keeps_the_modes_apart(m: &Modes) {
    let live = make(m, &m.live_key, false).await;
    let test = make(m, &m.test_key, true).await;
    let nobody: BTreeMap<&'static str, String> =
        live.ids.keys().map(|k| (*k, NOBODY.to_string())).collect();

    for (me, other) in [(&live, &test), (&test, &live)] {
        // Every route that names an object: the other mode's object is a missing one.
        let mut covered = 0;
        for (method, path, _) in TABLE.iter().filter(|(_, p, _)| p.contains('{')) {
            let (s, b) = call(
                m,
                method,
                &fill(path, &other.ids),
                &me.key,
                body_for(method, path),
            )
            .await;
            let (s0, b0) = call(
                m,
                method,
                &fill(path, &nobody),
                &me.key,
                body_for(method, path),
            )
            .await;
            assert_eq!(s, 404, "{method} {path} with the other mode's object: {b}");
            assert_eq!(
                (s, code(&b)),
                (s0, code(&b0)),
                "{method} {path}: as for a missing id"
            );
            if *method == "GET" {
                let (s, b) = call(m, method, &fill(path, &me.ids), &me.key, None).await;
                assert_eq!(s, 200, "{method} {path} with its own object: {b}");
            }
            covered += 1;
        }
        assert!(covered >= 25, "the table's object routes: {covered}");

        // Every list: none of the other mode's objects, numbers or customers.
        let others: Vec<&str> = other
            .ids
            .values()
            .map(String::as_str)
            .chain([
                other.number.as_str(),
                other.customer,
                &other.phone[1..],
                other.template,
            ])
            .collect();
        for (_, path, _) in TABLE
            .iter()
            .filter(|(m, p, _)| *m == "GET" && !p.contains('{') && *p != "/events/stream")
        {
            let (s, b) = call(m, "GET", path, &me.key, None).await;
            assert_eq!(s, 200, "GET {path}: {b}");
            let text = b.to_string();
            for id in &others {
                assert!(
                    !text.contains(id),
                    "GET {path} shows the other mode's {id}: {text}"
                );
            }
        }
        let (_, mine) = call(m, "GET", "/contacts", &me.key, None).await;
        assert!(mine.to_string().contains(&me.phone[1..]), "{mine}");

        // References inside bodies: the other mode's media, template and number are missing
        // ones too.
        let to = format!("+{}", me.customer);
        let message = |what: &str, value: &str| match what {
            "media" => json!({"to": to, "type": "image", "image": {"media_id": value}}),
            "template" => json!({"to": to, "type": "template",
                "template": {"name": value, "language": "en_US"}}),
            _ => json!({"to": to, "type": "text", "text": {"body": "x"}, "phone_number_id": value}),
        };
        for (what, theirs, missing) in [
            ("media", other.ids["media_id"].as_str(), NOBODY),
            ("template", other.template, "no_such_template"),
            ("number", other.number.as_str(), "999000999"),
        ] {
            let (s, b) = call(m, "POST", "/messages", &me.key, Some(message(what, theirs))).await;
            let (s0, b0) = call(
                m,
                "POST",
                "/messages",
                &me.key,
                Some(message(what, missing)),
            )
            .await;
            assert!(s >= 400, "a message with the other mode's {what}: {s} {b}");
            // The answer may name the reference: the same answer with the name swapped.
            let seen = plain(&b).replace(theirs, missing);
            let alike = plain(&b0);
            assert_eq!(
                (s, seen),
                (s0, alike),
                "a message with the other mode's {what}: as a missing one"
            );
        }
        let campaign = |template: &str| {
            json!({"name": "Cross", "template": {"name": template, "language": "en_US"},
                "audience": {"all_contacts": true}})
        };
        // A campaign names its template; resolving it finds the other mode's none.
        let mut resolved = Vec::new();
        for name in [other.template, "no_such_template"] {
            let c = created(m, "/campaigns", &me.key, campaign(name)).await;
            let mut answers = Vec::new();
            for step in ["resolve", "launch"] {
                let path = format!("/campaigns/{}/{step}", c["id"].as_str().unwrap());
                let (s, b) = call(m, "POST", &path, &me.key, Some(json!({}))).await;
                let details = b["details"]
                    .to_string()
                    .replace(other.template, "no_such_template");
                answers.push((s, code(&b), details));
            }
            resolved.push(answers);
        }
        assert!(
            resolved[0][1].0 >= 400,
            "launched with the other mode's template: {resolved:?}"
        );
        assert_eq!(
            resolved[0], resolved[1],
            "a campaign of the other mode's template"
        );
        // The other mode's contact's phone is free here.
        let (s, b) = call(
            m,
            "POST",
            "/contacts",
            &me.key,
            Some(json!({"phone": other.phone})),
        )
        .await;
        assert_eq!(s, 201, "the other mode's phone is not taken here: {b}");
    }
}

tern_store::both_backends! { Modes;
    every_route_keeps_the_modes_apart_http => every_route_keeps_the_modes_apart,
}
