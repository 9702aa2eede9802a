//! What the handlers' types cannot say, added to the serialised document so generated
//! clients get usable types: closed sets as named enums (values from the domain's own
//! lists, so the document cannot drift from what Tern accepts and shows), page items by
//! reference, the network's free-form objects open to any key, the send request's variants,
//! a modelled `Error.details`, UUID path ids and a server variable for the base URL.

use serde_json::{Map, Value, json};
use tern_domain::{ErrorCode, campaign, contact, events, message, number, plan, send, template};

/// The named enums: (schema, description, values).
pub(super) fn enums() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    fn names<T: Copy>(all: &[T], f: fn(T) -> &'static str) -> Vec<&'static str> {
        all.iter().copied().map(f).collect()
    }
    let window = [send::WindowState::Open, send::WindowState::Closed];
    vec![
        (
            "MessageStatus",
            "`accepted` → `sending` → `sent` → `delivered` → `read`, or `failed` (outbound); `received` (inbound).",
            names(message::Status::ALL, message::Status::as_str),
        ),
        (
            "Direction",
            "`outbound` (sent through Tern) or `inbound` (from a customer).",
            names(message::Direction::ALL, message::Direction::as_str),
        ),
        (
            "MessageType",
            "The message's type; a type the network adds later shows as `unsupported`.",
            names(message::MessageType::ALL, message::MessageType::as_str),
        ),
        (
            "WindowState",
            "`open` while free-form messages may be sent (24 hours from the customer's last message), else `closed`.",
            names(&window, send::WindowState::as_str),
        ),
        (
            "ConsentStatus",
            "A contact's consent to business-initiated messages.",
            names(contact::Consent::ALL, contact::Consent::as_str),
        ),
        (
            "ConsentChoice",
            "The decision to record.",
            names(contact::Consent::ALL, contact::Consent::as_str)
                .into_iter()
                .filter(|c| *c != contact::Consent::Unknown.as_str())
                .collect(),
        ),
        (
            "NumberStatus",
            "`connected` numbers can send.",
            names(number::NumberStatus::ALL, number::NumberStatus::as_str),
        ),
        (
            "TemplateStatus",
            "`draft` (in Tern, not submitted) → `pending` (in review) → `approved` or `rejected`; an approved template may later be `paused` or `disabled` by the network.",
            names(
                template::TemplateStatus::ALL,
                template::TemplateStatus::as_str,
            ),
        ),
        (
            "TemplateCategory",
            "The template's category; the network prices template messages by it.",
            names(plan::Category::ALL, plan::Category::as_str),
        ),
        (
            "CampaignStatus",
            "`draft` → `ready` (resolved) → `scheduled` → `running` ⇄ `paused` → `completed`.",
            names(campaign::Status::ALL, campaign::Status::as_str),
        ),
        (
            "RecipientStatus",
            "No message yet (`pending`, `skipped`, `expired`), or its message's status (`accepted` and `sending` are `queued`).",
            names(campaign::Bucket::ALL, campaign::Bucket::as_str),
        ),
        (
            "PauseReason",
            "Why a campaign is paused: `manual` (by its owner) or what stopped its sends.",
            names(campaign::PauseReason::ALL, campaign::PauseReason::as_str),
        ),
        (
            "EventTypeName",
            "An event type (see the event webhooks).",
            names(events::EventType::ALL, events::EventType::as_str),
        ),
        (
            "ContactFieldType",
            "The type of a custom contact field's values (`date`: YYYY-MM-DD).",
            contact::FIELD_TYPES.to_vec(),
        ),
        (
            "AttemptStatus",
            "The outcome of one delivery attempt.",
            names(
                tern_store::AttemptStatus::ALL,
                tern_store::AttemptStatus::as_str,
            ),
        ),
        (
            "ErrorCode",
            "Stable; switch on it. Each code has a page at /docs/errors/{code}.",
            ErrorCode::ALL.iter().map(|c| c.as_str()).collect(),
        ),
    ]
}

/// Properties whose values are one of the enums: (schema, property, enum).
const ENUM_PROPERTIES: &[(&str, &str, &str)] = &[
    ("Message", "status", "MessageStatus"),
    ("Message", "direction", "Direction"),
    ("Message", "type", "MessageType"),
    ("Conversation", "window_state", "WindowState"),
    ("Consent", "status", "ConsentStatus"),
    ("ConsentRequest", "status", "ConsentChoice"),
    ("PhoneNumber", "status", "NumberStatus"),
    ("Campaign", "pause_reason", "PauseReason"),
    ("ContactField", "type", "ContactFieldType"),
    ("WebhookAttempt", "status", "AttemptStatus"),
    ("WebhookAttempt", "event_type", "EventTypeName"),
    ("WebhookSubscription", "events", "EventTypeName"),
    ("Error", "code", "ErrorCode"),
];

/// Properties whose schema is a named one: (schema, property, referenced schema).
const NAMED_PROPERTIES: &[(&str, &str, &str)] = &[
    ("CreateCampaignRequest", "audience", "CampaignAudience"),
    ("CreateCampaignRequest", "template", "CampaignTemplate"),
    ("Campaign", "audience", "CampaignAudience"),
    ("Campaign", "template", "CampaignTemplate"),
];

/// Query parameters whose values are one of the enums: (path, parameter, enum).
const ENUM_PARAMETERS: &[(&str, &str, &str)] = &[
    ("/conversations", "window_state", "WindowState"),
    (
        "/conversations/{conversation_id}/messages",
        "direction",
        "Direction",
    ),
    (
        "/webhook-subscriptions/{webhook_id}/deliveries",
        "status",
        "AttemptStatus",
    ),
];

/// Properties that hold Tern ids (UUIDs) but are typed as plain strings.
const UUID_PROPERTIES: &[(&str, &str)] = &[("Message", "media_id")];

/// Fields an answer leaves out when they have no value (the contract says "present only
/// when …"); every other field of an answer is always present, as null when empty.
const OMITTED_WHEN_ABSENT: &[(&str, &str)] = &[
    ("Message", "campaign_id"),
    ("MediaObject", "download_url"),
    ("MediaObject", "download_url_expires_at"),
    ("WebhookSubscription", "secret"),
    ("Failure", "provider_href"),
];

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn is_nullable(schema: &Value) -> bool {
    match &schema["type"] {
        Value::Array(types) => types.iter().any(|t| t == "null"),
        _ => schema["oneOf"]
            .as_array()
            .is_some_and(|v| v.iter().any(|s| s["type"] == "null")),
    }
}

/// `schema` replaced by a reference to `name`, keeping its description and nullability.
fn referring(schema: &Value, name: &str) -> Value {
    let mut out = if is_nullable(schema) {
        json!({"oneOf": [reference(name), {"type": "null"}]})
    } else {
        reference(name)
    };
    if let Some(d) = schema.get("description") {
        out["description"] = d.clone();
    }
    out
}

/// Applies every refinement; `base_url` is the server variable's default.
pub(super) fn refine(v: &mut Value, base_url: &str) {
    v["servers"] = json!([{
        "url": "{base_url}/api/public/v1",
        "description": "Your Tern. Set `base_url` once (e.g. https://tern.example.com): every path is relative to it.",
        "variables": {"base_url": {
            "default": base_url,
            "description": "Scheme, host and port of the Tern server (its TERN_PUBLIC_URL), without a trailing slash."
        }}
    }]);
    let schemas = &mut v["components"]["schemas"];
    for (name, description, values) in enums() {
        schemas[name] = json!({"type": "string", "description": description, "enum": values});
    }
    for (name, schema) in crate::routes::messages::send_schemas()
        .into_iter()
        .chain(crate::routes::campaigns::campaign_schemas())
        .chain(crate::routes::timeline::timeline_schemas())
    {
        schemas[name] = schema;
    }
    schemas["FieldProblem"] = json!({
        "type": "object",
        "description": "One problem of a bad request.",
        "required": ["field", "message"],
        "properties": {
            "field": {"type": "string", "description": "The field's path, e.g. `to`, `template.variables[0]`, `cursor`, `Idempotency-Key`."},
            "message": {"type": "string"}
        }
    });
    schemas["ErrorDetails"] = error_details();
    for (schema, property, name) in ENUM_PROPERTIES.iter().chain(NAMED_PROPERTIES) {
        if let Some(p) = schemas
            .get_mut(*schema)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|s| s.get_mut(*property))
        {
            if p["type"] == "array" {
                p["items"] = reference(name);
            } else {
                *p = referring(p, name);
            }
        }
    }
    for (schema, property) in UUID_PROPERTIES {
        if let Some(p) = schemas
            .get_mut(*schema)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|s| s.get_mut(*property))
        {
            p["format"] = json!("uuid");
        }
    }
    if let Some(details) = schemas["Error"]["properties"].get_mut("details") {
        *details = reference("ErrorDetails");
    }
    // The example is always a template message.
    if let Some(example) = schemas["Template"]["properties"].get_mut("example") {
        *example = referring(
            example,
            &crate::routes::messages::send_variant_name(send::Kind::Template),
        );
    }
    page_items(schemas);
    answers_list_every_field(v);
    let schemas = &mut v["components"]["schemas"];
    if let Some(all) = schemas.as_object_mut() {
        for schema in all.values_mut() {
            open_free_form(schema);
        }
    }
    if let Some(paths) = v["paths"].as_object_mut() {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for op in item.values_mut() {
                parameters(path, op);
                // Inline request and response schemas are the network's shapes too.
                for_each_content_schema(op, open_free_form);
            }
        }
    }
}

/// The schema names `$ref`'d anywhere inside `v`.
fn refs_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref")
                && let Some(name) = r.strip_prefix("#/components/schemas/")
            {
                out.push(name.to_string());
            }
            o.values().for_each(|x| refs_in(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs_in(x, out)),
        _ => {}
    }
}

/// The schemas reachable from `roots` through `$ref`s.
fn reachable(schemas: &Value, roots: Vec<String>) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = roots;
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            refs_in(&schemas[&name], &mut todo);
        }
    }
    seen
}

/// An answer's schema requires every field Tern always sends (nullable ones included), so
/// a generated client types `wamid` as `str | None`, not also "unset". Schemas that requests
/// use too are left as they are: a request may leave optional fields out.
fn answers_list_every_field(v: &mut Value) {
    let (mut answers, mut requests) = (Vec::new(), Vec::new());
    if let Some(paths) = v["paths"].as_object() {
        for item in paths.values() {
            for op in item.as_object().into_iter().flat_map(|o| o.values()) {
                refs_in(&op["responses"], &mut answers);
                refs_in(&op["requestBody"], &mut requests);
                refs_in(&op["parameters"], &mut requests);
            }
        }
    }
    let schemas = &mut v["components"]["schemas"];
    let answers = reachable(schemas, answers);
    let requests = reachable(schemas, requests);
    // `ErrorDetails` is a bag of keys that depend on the code.
    for name in answers
        .difference(&requests)
        .filter(|n| *n != "ErrorDetails")
    {
        let Some(props) = schemas
            .get_mut(name)
            .and_then(|s| s.get_mut("properties"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let mut required = Vec::new();
        for (field, p) in props.iter_mut() {
            if OMITTED_WHEN_ABSENT.contains(&(name.as_str(), field.as_str())) {
                // Absent rather than null.
                if let Some(Value::Array(types)) = p.get("type") {
                    let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                    p["type"] = match kept.as_slice() {
                        [one] => one.clone(),
                        _ => Value::Array(kept),
                    };
                }
            } else {
                required.push(json!(field));
            }
        }
        schemas[name]["required"] = Value::Array(required);
    }
}

/// `Page_X.data.items` refers to `X` instead of a copy of it.
fn page_items(schemas: &mut Value) {
    let Some(all) = schemas.as_object_mut() else {
        return;
    };
    let names: Vec<String> = all.keys().cloned().collect();
    for name in names {
        let Some(item) = name.strip_prefix("Page_") else {
            continue;
        };
        if !all.contains_key(item) {
            continue;
        }
        if let Some(data) = all
            .get_mut(&name)
            .and_then(|p| p["properties"].get_mut("data"))
        {
            data["items"] = reference(item);
        }
    }
}

/// An object that names no properties (the network's `interactive`, template
/// `components`, contact cards, `custom_fields`, `content`, …) takes any key: without
/// `additionalProperties` TypeScript generators make it `Record<string, never>`.
fn open_free_form(schema: &mut Value) {
    let Some(o) = schema.as_object_mut() else {
        return;
    };
    let is_object = match o.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    if is_object && !o.contains_key("properties") && !o.contains_key("additionalProperties") {
        o.insert("additionalProperties".into(), Value::Bool(true));
    }
    for (k, child) in o.iter_mut() {
        match k.as_str() {
            "properties" => {
                if let Some(props) = child.as_object_mut() {
                    props.values_mut().for_each(open_free_form);
                }
            }
            "items" | "additionalProperties" => open_free_form(child),
            "oneOf" | "anyOf" | "allOf" => {
                if let Some(list) = child.as_array_mut() {
                    list.iter_mut().for_each(open_free_form);
                }
            }
            _ => {}
        }
    }
}

fn for_each_content_schema(op: &mut Value, f: fn(&mut Value)) {
    let visit = |content: Option<&mut Value>| {
        if let Some(Value::Object(types)) = content {
            for media in types.values_mut() {
                if let Some(s) = media.get_mut("schema") {
                    f(s);
                }
            }
        }
    };
    visit(op.pointer_mut("/requestBody/content"));
    if let Some(Value::Object(responses)) = op.get_mut("responses") {
        for r in responses.values_mut() {
            visit(r.get_mut("content"));
        }
    }
}

/// Path ids are UUIDs; enum-valued query parameters refer to their enum.
fn parameters(path: &str, op: &mut Value) {
    let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) else {
        return;
    };
    for p in params {
        let name = p["name"].as_str().unwrap_or_default().to_string();
        if p["in"] == "path" && name.ends_with("_id") {
            p["schema"] = json!({"type": "string", "format": "uuid"});
        }
        if p["in"] == "query"
            && let Some((_, _, e)) = ENUM_PARAMETERS
                .iter()
                .find(|(pp, n, _)| *pp == path && *n == name)
        {
            p["schema"] = reference(e);
        }
    }
}

/// `Error.details`: the keys the catalog's codes carry, typed; others may appear.
fn error_details() -> Value {
    let int = |d: &str| json!({"type": "integer", "description": d});
    let text = |d: &str| json!({"type": "string", "description": d});
    let mut props = Map::new();
    props.insert(
        "fields".into(),
        json!({"type": "array", "items": reference("FieldProblem"),
               "description": "`validation_failed` (and other 400s): every problem of the request."}),
    );
    for (k, d) in [
        (
            "reason",
            "What exactly stopped the request (e.g. `to_needs_country_code`, `from_required`, `media_import_capacity`); for `conflict` one of the reasons listed at /docs/errors/conflict.",
        ),
        (
            "permission",
            "`permission_denied`: the permission the key lacks.",
        ),
        ("feature", "`plan_feature_unavailable`: the feature."),
        ("plan", "`plan_feature_unavailable`: the current plan."),
        (
            "upgrade_plan",
            "`plan_feature_unavailable`: the plan that has the feature.",
        ),
        (
            "entitlement",
            "`plan_limit_reached`: what is counted (e.g. `contacts`, `webhook_subscriptions`).",
        ),
        ("action", "`subscription_restricted`: what to do."),
        (
            "period_end",
            "`usage_limit_reached`: when the billing period ends (RFC 3339).",
        ),
        (
            "wallet_category",
            "`wallet_balance_low`: the template category priced.",
        ),
        (
            "top_up_path",
            "`wallet_balance_low`: where to top up the wallet.",
        ),
        ("window", "`quota_exceeded`: the window that ran out."),
        ("idempotency_key", "The `Idempotency-Key` concerned."),
        ("first_used_at", "When that key was first used (RFC 3339)."),
        ("constraint", "The uniqueness rule a conflict broke."),
    ] {
        props.insert(k.into(), text(d));
    }
    for (k, d) in [
        ("limit", "`plan_limit_reached`: the plan's limit."),
        (
            "used",
            "`plan_limit_reached`, `usage_limit_reached`: how much is used.",
        ),
        (
            "allowance",
            "`usage_limit_reached`: the period's allowance.",
        ),
        (
            "balance_minor",
            "`wallet_balance_low`: the balance, in minor units.",
        ),
        (
            "required_minor",
            "`wallet_balance_low`: the price of the message (a campaign's launch or resume: of its recipients left), in minor units.",
        ),
        ("limit_bytes", "The size limit in bytes."),
        ("size_bytes", "The size received in bytes."),
    ] {
        props.insert(k.into(), int(d));
    }
    props.insert(
        "scope".into(),
        json!({"type": "string", "enum": ["key", "tenant"], "description": "`quota_exceeded`: whose quota ran out, the key's or the organisation's (`tenant`)."}),
    );
    props.insert(
        "meter".into(),
        json!({"type": "string", "enum": ["api_requests", "messages_sent"], "description": "`usage_limit_reached`: the allowance used up."}),
    );
    props.insert(
        "status".into(),
        json!({"oneOf": [{"type": "string"}, {"type": "integer"}],
               "description": "The state that refused the request (e.g. a campaign's or a subscription's status), or the HTTP status a media import got."}),
    );
    props.insert(
        "numbers".into(),
        json!({"type": "array", "description": "`from_required`: the numbers to choose from.",
               "items": {"type": "object", "required": ["id", "display_phone_number", "status"],
                         "properties": {"id": {"type": "string"}, "display_phone_number": {"type": "string"},
                                        "status": reference("NumberStatus")}}}),
    );
    json!({
        "type": "object",
        "description": "Extra context for some codes (see each code's page); other keys may appear.",
        "properties": props,
        "additionalProperties": true
    })
}
