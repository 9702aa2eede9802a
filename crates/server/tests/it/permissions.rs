//! Every endpoint needs one permission (the contract's table): a key holding every other
//! permission gets `403 permission_denied` naming the missing one, before anything else of
//! the request is looked at. The table must cover every operation of the API document, so a
//! new endpoint cannot be added without its line here.

use crate::common::{TestApp, assert_error, send};
use std::collections::BTreeSet;
use tern_domain::auth::Permission;

const ID: &str = "0190f0f0-0000-7000-8000-000000000000";

/// (method, path as in the API document, the permission the contract names).
pub(crate) const TABLE: &[(&str, &str, &str)] = &[
    ("POST", "/messages", "messages.send"),
    ("POST", "/media", "messages.send"),
    ("GET", "/messages/{message_id}", "messages.read"),
    ("GET", "/messages/{message_id}/timeline", "messages.read"),
    ("POST", "/messages/{message_id}/read", "messages.send"),
    ("POST", "/test/inbound", "messages.send"),
    ("GET", "/media/{media_id}", "messages.read"),
    ("GET", "/conversations", "messages.read"),
    (
        "GET",
        "/conversations/{conversation_id}/messages",
        "messages.read",
    ),
    ("GET", "/contacts", "contacts.read"),
    ("POST", "/contacts", "contacts.create"),
    ("GET", "/contacts/{contact_id}", "contacts.read"),
    ("PATCH", "/contacts/{contact_id}", "contacts.update"),
    ("POST", "/contacts/{contact_id}/consent", "contacts.update"),
    ("POST", "/contacts/{contact_id}/tags", "contacts.update"),
    ("POST", "/contacts/{contact_id}/block", "contacts.update"),
    ("DELETE", "/contacts/{contact_id}/block", "contacts.update"),
    (
        "DELETE",
        "/contacts/{contact_id}/tags/{tag}",
        "contacts.update",
    ),
    ("GET", "/contact-fields", "contacts.read"),
    ("GET", "/tags", "contacts.read"),
    ("GET", "/templates", "templates.read"),
    ("POST", "/templates", "templates.create"),
    ("GET", "/templates/{template_id}", "templates.read"),
    (
        "POST",
        "/templates/{template_id}/submit",
        "templates.submit",
    ),
    ("GET", "/campaigns", "campaigns.read"),
    ("POST", "/campaigns", "campaigns.create"),
    ("GET", "/campaigns/{campaign_id}", "campaigns.read"),
    ("GET", "/campaigns/{campaign_id}/progress", "campaigns.read"),
    // An extension: the recipients list reads like progress.
    (
        "GET",
        "/campaigns/{campaign_id}/recipients",
        "campaigns.read",
    ),
    (
        "POST",
        "/campaigns/{campaign_id}/schedule",
        "campaigns.update",
    ),
    ("POST", "/campaigns/{campaign_id}/resolve", "campaigns.send"),
    ("POST", "/campaigns/{campaign_id}/launch", "campaigns.send"),
    ("POST", "/campaigns/{campaign_id}/pause", "campaigns.send"),
    ("POST", "/campaigns/{campaign_id}/resume", "campaigns.send"),
    ("GET", "/webhook-subscriptions", "developer.webhooks.manage"),
    (
        "POST",
        "/webhook-subscriptions",
        "developer.webhooks.manage",
    ),
    (
        "PATCH",
        "/webhook-subscriptions/{webhook_id}",
        "developer.webhooks.manage",
    ),
    (
        "DELETE",
        "/webhook-subscriptions/{webhook_id}",
        "developer.webhooks.manage",
    ),
    (
        "POST",
        "/webhook-subscriptions/{webhook_id}/rotate-secret",
        "developer.webhooks.manage",
    ),
    (
        "POST",
        "/webhook-subscriptions/{webhook_id}/test",
        "developer.webhooks.manage",
    ),
    (
        "GET",
        "/webhook-subscriptions/{webhook_id}/deliveries",
        "developer.webhooks.manage",
    ),
    (
        "POST",
        "/webhook-subscriptions/{webhook_id}/replay",
        "developer.webhooks.manage",
    ),
    // APP.md §5: listening without a public URL.
    ("GET", "/events/stream", "developer.webhooks.manage"),
    ("POST", "/events/trigger", "developer.webhooks.manage"),
    // Not in the contract's table (docs/decisions/keys.md): reading the numbers.
    ("GET", "/phone-numbers", "numbers.read"),
];

/// Operations that take no key: the signed download link.
const KEYLESS: &[(&str, &str)] = &[("GET", "/media/{media_id}/download")];

fn concrete(path: &str) -> String {
    let mut out = String::from("/api/public/v1");
    for seg in path.split('/').skip(1) {
        out.push('/');
        out.push_str(match seg {
            "{tag}" => "vip",
            s if s.starts_with('{') => ID,
            s => s,
        });
    }
    out
}

#[test]
fn the_table_covers_every_operation() {
    let doc = tern_api::openapi::finish(tern_api::routes::public_api().into_openapi());
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "patch", "put", "delete"].contains(&method.as_str()) {
                ops.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let listed: BTreeSet<_> = TABLE
        .iter()
        .map(|(m, p, _)| (m.to_string(), p.to_string()))
        .chain(KEYLESS.iter().map(|(m, p)| (m.to_string(), p.to_string())))
        .collect();
    assert_eq!(ops, listed);
    for (_, _, perm) in TABLE {
        assert!(Permission::parse(perm).is_some(), "{perm}");
    }
}

tern_store::both_backends! { TestApp;
    a_missing_permission_is_403_naming_it => async |app: &TestApp| {
        // One key per missing permission, holding all the others.
        let mut keys = std::collections::HashMap::new();
        for (method, path, needed) in TABLE {
            if !keys.contains_key(needed) {
                let others: Vec<&str> = Permission::ALL
                    .iter()
                    .map(|p| p.as_str())
                    .filter(|p| p != needed)
                    .collect();
                let (_, key) = app
                    .key_for(&app.org_id, &app.owner_id, &["--permissions", &others.join(",")])
                    .await;
                keys.insert(*needed, key);
            }
            let key = &keys[needed];
            let req = app
                .http
                .request(method.parse().unwrap(), app.url(&concrete(path)))
                .bearer_auth(key);
            let req = if *method == "GET" || *method == "DELETE" { req } else { req.json(&serde_json::json!({})) };
            let (s, h, b) = send(req).await;
            assert_eq!(s, 403, "{method} {path}: {b}");
            assert_error(s, &h, &b, 403, "permission_denied");
            assert_eq!(b["details"]["permission"], *needed, "{method} {path}");
        }
    },
}
