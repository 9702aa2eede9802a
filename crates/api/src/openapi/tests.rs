//! The document's promises to client generators, checked over the whole document so a new
//! endpoint cannot quietly break them.

use super::refine::enums;
use serde_json::{Value, json};

fn doc() -> Value {
    super::finish(crate::routes::public_api().into_openapi())
}

fn schema<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let s = &doc["components"]["schemas"][name];
    assert!(s.is_object(), "no schema {name}");
    s
}

/// Calls `f(path, schema)` on every schema reachable inside `s` (not through `$ref`).
fn walk(path: &str, s: &Value, f: &mut dyn FnMut(&str, &Value)) {
    f(path, s);
    if let Some(props) = s["properties"].as_object() {
        for (k, v) in props {
            walk(&format!("{path}.{k}"), v, f);
        }
    }
    for k in ["items", "additionalProperties"] {
        if s[k].is_object() {
            walk(&format!("{path}[]"), &s[k], f);
        }
    }
    for k in ["oneOf", "anyOf", "allOf"] {
        if let Some(list) = s[k].as_array() {
            for (i, v) in list.iter().enumerate() {
                walk(&format!("{path}|{i}"), v, f);
            }
        }
    }
}

fn all_schemas(doc: &Value, f: &mut dyn FnMut(&str, &Value)) {
    for (name, s) in doc["components"]["schemas"].as_object().unwrap() {
        walk(name, s, f);
    }
}

fn refers_to(s: &Value, name: &str) -> bool {
    let target = json!(format!("#/components/schemas/{name}"));
    s["$ref"] == target
        || s["oneOf"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x["$ref"] == target))
}

#[test]
fn the_document_names_each_closed_set_once_with_the_domain_values() {
    let doc = doc();
    for (name, _, values) in enums() {
        assert_eq!(schema(&doc, name)["enum"], json!(values), "{name}");
    }
    for (s, p, e) in [
        ("Message", "status", "MessageStatus"),
        ("Message", "direction", "Direction"),
        ("Message", "type", "MessageType"),
        ("Conversation", "window_state", "WindowState"),
        ("Consent", "status", "ConsentStatus"),
        ("ConsentRequest", "status", "ConsentChoice"),
        ("PhoneNumber", "status", "NumberStatus"),
        ("Template", "status", "TemplateStatus"),
        ("Template", "category", "TemplateCategory"),
        ("Campaign", "status", "CampaignStatus"),
        ("Campaign", "pause_reason", "PauseReason"),
        ("Recipient", "status", "RecipientStatus"),
        ("ContactField", "type", "ContactFieldType"),
        ("WebhookAttempt", "status", "AttemptStatus"),
        ("Error", "code", "ErrorCode"),
    ] {
        let prop = &schema(&doc, s)["properties"][p];
        assert!(refers_to(prop, e), "{s}.{p} is {prop}");
    }
    let events = &schema(&doc, "WebhookSubscription")["properties"]["events"]["items"];
    assert!(refers_to(events, "EventTypeName"), "{events}");
    assert!(
        schema(&doc, "ErrorCode")["enum"]
            .as_array()
            .unwrap()
            .contains(&json!("wallet_balance_low"))
    );
    // Query filters with a closed set refer to it too.
    for (path, param, e) in [
        ("/conversations", "window_state", "WindowState"),
        (
            "/conversations/{conversation_id}/messages",
            "direction",
            "Direction",
        ),
        ("/campaigns", "status", "CampaignStatus"),
        ("/templates", "status", "TemplateStatus"),
        (
            "/webhook-subscriptions/{webhook_id}/deliveries",
            "status",
            "AttemptStatus",
        ),
    ] {
        let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
        let p = params.iter().find(|p| p["name"] == param).unwrap();
        assert!(refers_to(&p["schema"], e), "{path} {param}: {p}");
    }
}

/// Every string property named like a state or kind is an enum, unless it is listed here as
/// open (failure codes, reasons and the network's pricing words grow with the network; names
/// and texts are free).
#[test]
fn no_state_or_kind_is_a_bare_string() {
    const OPEN: &[&str] = &[
        "Failure.code",
        "Pricing.category",
        "Pricing.type",
        "Message.failure_code",
        "Recipient.reason",
        "ErrorDetails.reason",
        "ErrorDetails.status|0",
        "ErrorDetails.meter",
        "ErrorDetails.scope",
    ];
    let doc = doc();
    let mut bare = Vec::new();
    all_schemas(&doc, &mut |path, s| {
        let last = path.rsplit('.').next().unwrap_or_default();
        let named = [
            "status",
            "direction",
            "type",
            "window_state",
            "category",
            "code",
        ]
        .iter()
        .any(|n| last == *n || last.starts_with(&format!("{n}|")));
        let string = s["type"] == "string" || s["type"] == json!(["string", "null"]);
        let closed = s.get("enum").is_some() || s.get("const").is_some();
        if named && string && !closed && !OPEN.contains(&path) {
            bare.push(path.to_string());
        }
    });
    // Contact cards and template components keep the network's own open `type` strings.
    bare.retain(|p| !p.contains(".components[]") && !p.starts_with("Send"));
    assert!(bare.is_empty(), "bare strings: {bare:?}");
}

#[test]
fn pages_refer_to_their_item_schema() {
    let doc = doc();
    let mut pages = 0;
    for (name, s) in doc["components"]["schemas"].as_object().unwrap() {
        if let Some(item) = name.strip_prefix("Page_") {
            pages += 1;
            assert!(refers_to(&s["properties"]["data"]["items"], item), "{name}");
        }
    }
    assert!(pages >= 10, "{pages} pages");
}

#[test]
fn free_form_objects_take_any_key() {
    let doc = doc();
    let mut closed = Vec::new();
    all_schemas(&doc, &mut |path, s| {
        let object = s["type"] == "object" || s["type"] == json!(["object", "null"]);
        if object && s.get("properties").is_none() && s.get("additionalProperties").is_none() {
            closed.push(path.to_string());
        }
    });
    assert!(closed.is_empty(), "{closed:?}");
    for (s, p) in [
        ("Message", "content"),
        ("Contact", "custom_fields"),
        ("Message", "referral"),
    ] {
        assert_eq!(
            schema(&doc, s)["properties"][p]["additionalProperties"],
            true,
            "{s}.{p}"
        );
    }
    assert_eq!(schema(&doc, "Interactive")["additionalProperties"], true);
}

#[test]
fn ids_are_uuids_wherever_they_are_terns() {
    // The network's ids (numbers, accounts, customers, messages) are not UUIDs.
    const NETWORK: &[&str] = &[
        "phone_number_id",
        "waba_id",
        "wa_id",
        "user_id",
        "parent_user_id",
        "request_id",
        "message_id",
        "network_media_id",
    ];
    let doc = doc();
    let mut wrong = Vec::new();
    all_schemas(&doc, &mut |path, s| {
        let last = path.rsplit('.').next().unwrap_or_default();
        let is_id = last == "id" || last.ends_with("_id");
        let string = s["type"] == "string" || s["type"] == json!(["string", "null"]);
        if is_id
            && string
            && s["format"] != "uuid"
            && !NETWORK.contains(&last)
            && !path.starts_with("PhoneNumber.id")
            && !path.starts_with("ErrorDetails.numbers")
            && !path.starts_with("ReplyButton")
            && !path.contains(".media_id")
        {
            wrong.push(path.to_string());
        }
    });
    assert!(wrong.is_empty(), "{wrong:?}");
    assert_eq!(
        schema(&doc, "Message")["properties"]["media_id"]["format"],
        "uuid"
    );
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for p in op["parameters"].as_array().into_iter().flatten() {
                if p["in"] == "path" && p["name"].as_str().unwrap().ends_with("_id") {
                    assert_eq!(p["schema"]["format"], "uuid", "{method} {path} {p}");
                }
            }
        }
    }
}

#[test]
fn errors_model_their_details() {
    let doc = doc();
    assert!(refers_to(
        &schema(&doc, "Error")["properties"]["details"],
        "ErrorDetails"
    ));
    let details = &schema(&doc, "ErrorDetails")["properties"];
    assert!(refers_to(&details["fields"]["items"], "FieldProblem"));
    for k in [
        "reason",
        "permission",
        "scope",
        "entitlement",
        "limit",
        "used",
        "meter",
        "allowance",
        "period_end",
        "balance_minor",
        "required_minor",
        "wallet_category",
        "top_up_path",
        "feature",
        "plan",
        "upgrade_plan",
        "action",
        "numbers",
    ] {
        assert!(details[k].is_object(), "details.{k}");
    }
    // Every key a catalog code may carry is modelled.
    for code in tern_domain::ErrorCode::ALL {
        for k in code.entry().details {
            assert!(details[*k].is_object(), "{}: details.{k}", code.as_str());
        }
    }
}

#[test]
fn the_send_request_is_one_of_its_types_and_the_template_example_is_one() {
    let doc = doc();
    let send = schema(&doc, "SendMessageRequest");
    assert_eq!(send["discriminator"]["propertyName"], "type");
    assert_eq!(send["oneOf"].as_array().unwrap().len(), 11);
    assert!(refers_to(
        &schema(&doc, "Template")["properties"]["example"],
        "SendTemplateRequest"
    ));
    let body =
        &doc["paths"]["/messages"]["post"]["requestBody"]["content"]["application/json"]["schema"];
    assert!(refers_to(body, "SendMessageRequest"), "{body}");
}

#[test]
fn a_server_variable_sets_the_base_url_once() {
    let doc = super::finish_at(
        crate::routes::public_api().into_openapi(),
        "https://tern.example.com",
    );
    let server = &doc["servers"][0];
    assert_eq!(server["url"], "{base_url}/api/public/v1");
    assert_eq!(
        server["variables"]["base_url"]["default"],
        "https://tern.example.com"
    );
    assert!(server["variables"]["base_url"]["description"].is_string());
}

#[test]
fn answers_require_what_they_always_send() {
    let doc = doc();
    let message = schema(&doc, "Message");
    let required = message["required"].as_array().unwrap();
    for f in ["wamid", "sent_at", "failure", "content", "reply_to", "text"] {
        assert!(required.contains(&json!(f)), "Message.{f}");
    }
    // Left out when empty (the contract's "present only when …"): optional, never null.
    assert!(!required.contains(&json!("campaign_id")));
    assert_eq!(message["properties"]["campaign_id"]["type"], "string");
    let page = schema(&doc, "Page_Contact");
    assert!(
        page["required"]
            .as_array()
            .unwrap()
            .contains(&json!("next_cursor"))
    );
    // Request bodies keep their optional fields optional.
    let upsert = schema(&doc, "UpsertContactRequest")["required"].clone();
    assert!(!upsert.as_array().into_iter().flatten().any(|f| f == "name"));
    assert!(schema(&doc, "ErrorDetails").get("required").is_none());
}

#[test]
fn shared_request_parts_are_named_once() {
    let doc = doc();
    let to = &schema(&doc, "SendTextRequest")["properties"]["to"]["oneOf"];
    for name in [
        "RecipientByContactId",
        "RecipientByWaId",
        "RecipientByUserId",
    ] {
        assert!(
            to.as_array().unwrap().iter().any(|v| refers_to(v, name)),
            "{name}"
        );
    }
    assert!(refers_to(
        &schema(&doc, "SendImageRequest")["properties"]["context"],
        "ReplyContext"
    ));
    assert_eq!(
        schema(&doc, "SendImageRequest")["properties"]["image"]["properties"]["media_id"]["format"],
        "uuid"
    );
    assert!(refers_to(
        &schema(&doc, "SendInteractiveRequest")["properties"]["interactive"],
        "Interactive"
    ));
    for s in ["CreateCampaignRequest", "Campaign"] {
        let props = &schema(&doc, s)["properties"];
        assert!(refers_to(&props["audience"], "CampaignAudience"), "{s}");
        assert!(refers_to(&props["template"], "CampaignTemplate"), "{s}");
    }
    assert_eq!(
        schema(&doc, "CampaignAudience")["oneOf"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn every_schema_is_well_formed() {
    let doc = doc();
    all_schemas(&doc, &mut |path, s| {
        assert!(s.is_object() || s.is_boolean(), "{path}: {s}");
        for k in ["properties", "items", "required", "enum", "oneOf"] {
            assert!(s.get(k).is_none_or(|v| !v.is_null()), "{path}.{k} is null");
        }
    });
}

/// The tag schema (items of tag lists and the removal's path parameter) refuses exactly the
/// characters `normalise_tag` refuses: `/`, control and invisible formatting characters.
#[test]
fn the_tag_pattern_says_what_the_tag_rule_does() {
    let doc = doc();
    let pattern = schema(&doc, "TagName")["pattern"].as_str().unwrap();
    let re = regex::Regex::new(pattern).unwrap();
    let removal = &doc["paths"]["/contacts/{contact_id}/tags/{tag}"]["delete"]["parameters"];
    let tag = removal
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "tag")
        .unwrap();
    assert!(refers_to(&tag["schema"], "TagName"), "{tag}");
    // Planes 0 and 1 and the tag characters' plane 14 (the others hold no Cc/Cf character).
    for c in (0..=0x1FFFF)
        .chain(0xE0000..=0xE0FFF)
        .filter_map(char::from_u32)
    {
        let s = format!("a{c}b");
        assert_eq!(
            re.is_match(&s),
            tern_domain::contact::normalise_tag(&s).is_ok(),
            "U+{:04X}",
            u32::from(c)
        );
    }
    assert!(!re.is_match("vip\u{e0041}") && !re.is_match("  "));
}

/// Every length and count limit in the document (`maxLength`, `maxItems`), by JSON pointer.
fn limits(p: &str, v: &Value, out: &mut Vec<(String, &'static str, u64)>) {
    match v {
        Value::Object(m) => {
            for k in ["maxLength", "maxItems"] {
                if let Some(n) = m.get(k).and_then(Value::as_u64) {
                    out.push((p.to_string(), k, n));
                }
            }
            for (k, x) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                limits(&format!("{p}/{k}"), x, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                limits(&format!("{p}/{i}"), x, out);
            }
        }
        _ => {}
    }
}

/// Every limit the document states is the domain's constant for it. Annotations take only
/// literals (utoipa), so this table is what keeps them equal to the rules; a new limit
/// must be added here.
#[test]
fn every_limit_in_the_document_is_the_domain_constant() {
    use tern_domain::events::subscription;
    use tern_domain::{campaign, contact, send, template};
    let s = "/components/schemas";
    let table: Vec<(String, &str, usize)> = vec![
        (
            format!("{s}/AddTagsRequest/properties/tags"),
            "maxItems",
            contact::MAX_TAGS_PER_REQUEST,
        ),
        (
            format!("{s}/UpsertContactRequest/properties/tags"),
            "maxItems",
            contact::MAX_TAGS_PER_REQUEST,
        ),
        (
            format!("{s}/UpsertContactRequest/properties/name"),
            "maxLength",
            contact::MAX_NAME_CHARS,
        ),
        (
            format!("{s}/UpdateContactRequest/properties/name"),
            "maxLength",
            contact::MAX_NAME_CHARS,
        ),
        (
            format!("{s}/ConsentRequest/properties/source"),
            "maxLength",
            contact::MAX_CONSENT_SOURCE_CHARS,
        ),
        (format!("{s}/TagName"), "maxLength", contact::MAX_TAG_CHARS),
        (
            format!("{s}/AudienceAllContacts/properties/exclude_tags"),
            "maxItems",
            campaign::MAX_TAGS,
        ),
        (
            format!("{s}/AudienceByContactIds/properties/contact_ids"),
            "maxItems",
            campaign::MAX_CONTACT_IDS,
        ),
        (
            format!("{s}/AudienceByContactIds/properties/exclude_tags"),
            "maxItems",
            campaign::MAX_TAGS,
        ),
        (
            format!("{s}/AudienceByTags/properties/exclude_tags"),
            "maxItems",
            campaign::MAX_TAGS,
        ),
        (
            format!("{s}/AudienceByTags/properties/tags"),
            "maxItems",
            campaign::MAX_TAGS,
        ),
        (
            format!("{s}/CreateCampaignRequest/properties/name"),
            "maxLength",
            campaign::MAX_NAME_CHARS,
        ),
        (
            format!("{s}/CreateSubscriptionRequest/properties/description"),
            "maxLength",
            subscription::MAX_DESCRIPTION_CHARS,
        ),
        (
            format!("{s}/CreateSubscriptionRequest/properties/url"),
            "maxLength",
            subscription::MAX_URL_LEN,
        ),
        (
            format!("{s}/UpdateSubscriptionRequest/properties/description"),
            "maxLength",
            subscription::MAX_DESCRIPTION_CHARS,
        ),
        (
            format!("{s}/UpdateSubscriptionRequest/properties/url"),
            "maxLength",
            subscription::MAX_URL_LEN,
        ),
        (
            format!("{s}/CreateTemplateRequest/properties/components"),
            "maxItems",
            template::COMPONENT_TYPES.len(),
        ),
        (
            format!("{s}/CreateTemplateRequest/properties/name"),
            "maxLength",
            template::MAX_NAME_CHARS,
        ),
        (
            format!("{s}/Interactive/properties/action/properties/button"),
            "maxLength",
            send::MAX_LIST_BUTTON_CHARS,
        ),
        (
            format!("{s}/Interactive/properties/action/properties/buttons"),
            "maxItems",
            send::MAX_REPLY_BUTTONS,
        ),
        (
            format!("{s}/Interactive/properties/action/properties/sections"),
            "maxItems",
            send::MAX_LIST_SECTIONS,
        ),
        (
            format!("{s}/Interactive/properties/body/properties/text"),
            "maxLength",
            send::MAX_LIST_BODY_CHARS,
        ),
        (
            format!("{s}/Interactive/properties/footer/properties/text"),
            "maxLength",
            send::MAX_INTERACTIVE_FOOTER_CHARS,
        ),
        (
            format!("{s}/Interactive/properties/header/properties/text"),
            "maxLength",
            send::MAX_INTERACTIVE_HEADER_CHARS,
        ),
        (
            format!("{s}/ReplyButton/properties/reply/properties/id"),
            "maxLength",
            send::MAX_REPLY_BUTTON_ID_CHARS,
        ),
        (
            format!("{s}/ReplyButton/properties/reply/properties/title"),
            "maxLength",
            send::MAX_REPLY_BUTTON_TITLE_CHARS,
        ),
        (
            format!("{s}/ReplyContext/properties/message_id"),
            "maxLength",
            send::MAX_MESSAGE_ID_CHARS,
        ),
        (
            format!("{s}/SendDocumentRequest/properties/document/properties/caption"),
            "maxLength",
            send::MAX_CAPTION_CHARS,
        ),
        (
            format!("{s}/SendDocumentRequest/properties/document/properties/filename"),
            "maxLength",
            send::MAX_FILENAME_CHARS,
        ),
        (
            format!("{s}/SendImageRequest/properties/image/properties/caption"),
            "maxLength",
            send::MAX_CAPTION_CHARS,
        ),
        (
            format!("{s}/SendVideoRequest/properties/video/properties/caption"),
            "maxLength",
            send::MAX_CAPTION_CHARS,
        ),
        (
            format!("{s}/SendTextRequest/properties/text/properties/body"),
            "maxLength",
            send::MAX_TEXT_CHARS,
        ),
        (
            "/paths/~1messages/post/parameters/0/schema".into(),
            "maxLength",
            send::IDEMPOTENCY_KEY_MAX_CHARS,
        ),
    ];
    let mut found = Vec::new();
    limits("", &doc(), &mut found);
    for (pointer, key, n) in &found {
        let want = table
            .iter()
            .find(|(p, k, _)| p == pointer && k == key)
            .unwrap_or_else(|| panic!("{pointer} {key}={n} is not in the table of domain limits"));
        assert_eq!(*n, want.2 as u64, "{pointer} {key}");
    }
    for (pointer, key, _) in &table {
        assert!(
            found.iter().any(|(p, k, _)| p == pointer && k == key),
            "{pointer} {key} is no longer in the document"
        );
    }
    // The Idempotency-Key's other bounds, written in the same annotation.
    let key = &doc()["paths"]["/messages"]["post"]["parameters"][0];
    assert_eq!(key["name"], "Idempotency-Key");
    assert_eq!(
        key["schema"]["minLength"],
        json!(send::IDEMPOTENCY_KEY_MIN_CHARS)
    );
    let pattern = format!(
        "{{{},{}}}$",
        send::IDEMPOTENCY_KEY_MIN_CHARS - 1,
        send::IDEMPOTENCY_KEY_MAX_CHARS - 1
    );
    assert!(
        key["schema"]["pattern"]
            .as_str()
            .unwrap()
            .ends_with(&pattern),
        "{key}"
    );
}

/// The whole document as reviewed: any change to it (a field, a limit, a description) shows
/// in the diff of `src/openapi/snapshots/`. Update with `INSTA_UPDATE=always cargo test -p
/// tern-api openapi_document` and review the diff.
#[test]
fn openapi_document() {
    insta::assert_json_snapshot!("openapi", doc());
}
