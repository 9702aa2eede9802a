//! Campaigns: one approved template sent to an audience of contacts (DESIGN.md
//! "Campaigns"). The statuses and which action each allows, the create body, audiences,
//! per-recipient variables, progress buckets and the auto-pause rule on failures.

use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::error::ConflictReason;
use crate::message::Status as MessageStatus;
use crate::names::name_enum;
use crate::send::{Sender, sender_from};
use crate::template::{check_language, value_problem};
use crate::time::parse_rfc3339_ms;
use crate::validate::Fields;
use crate::{FieldError, Problem, contact};

name_enum!(
    /// A campaign's status: `draft` → `ready` (resolved) → `scheduled` → `running` ⇄
    /// `paused` → `completed`.
    Status {
        Draft = "draft",
        Ready = "ready",
        Scheduled = "scheduled",
        Running = "running",
        Paused = "paused",
        Completed = "completed",
    }
);
name_enum!(
    /// The actions of `POST /campaigns/{id}/<action>`.
    Action {
        Resolve = "resolve",
        Schedule = "schedule",
        Launch = "launch",
        Pause = "pause",
        Resume = "resume",
    }
);
name_enum!(
    /// Why a campaign is paused: by its owner, or by Tern when sends cannot go on.
    PauseReason {
        Manual = "manual",
        WalletBalanceLow = "wallet_balance_low",
        UsageLimitReached = "usage_limit_reached",
        SubscriptionRestricted = "subscription_restricted",
        ErrorThreshold = "error_threshold",
        TemplateNotApproved = "template_not_approved",
        PhoneNumberNotConnected = "phone_number_not_connected",
        PlanFeatureUnavailable = "plan_feature_unavailable",
    }
);
name_enum!(
    /// A recipient's status as the API shows it, and the progress buckets: no message yet
    /// (`pending`, `skipped`, `expired`), or its message's status (`accepted` and `sending`
    /// are `queued`).
    Bucket {
        Pending = "pending",
        Queued = "queued",
        Sent = "sent",
        Delivered = "delivered",
        Read = "read",
        Failed = "failed",
        Skipped = "skipped",
        Expired = "expired",
    }
);
name_enum!(
    /// Why a recipient gets no message.
    SkipReason {
        OptedOut = "opted_out",
        VariableInvalid = "variable_invalid",
        PhoneNumberRequired = "phone_number_required",
        NoAddress = "no_address",
        Blocked = "blocked",
    }
);

name_enum!(
    /// The stored state of a recipient row (`campaign_recipients.status`): no message yet
    /// (`pending`), its one message exists (`messaged`), or none will be sent (`skipped`
    /// with a reason, `expired`; an expired recipient may keep a message that never left).
    RecipientState {
        Pending = "pending",
        Messaged = "messaged",
        Skipped = "skipped",
        Expired = "expired",
    }
);
name_enum!(
    /// What a campaign's reason counter counts: skip reasons or failure codes.
    ReasonKind {
        Skipped = "skipped",
        Failed = "failed",
    }
);

/// At most this many ids in `audience.contact_ids`.
pub const MAX_CONTACT_IDS: usize = 10_000;
/// At most this many tags in `audience.tags` / `exclude_tags`.
pub const MAX_TAGS: usize = 50;
/// The longest campaign name.
pub const MAX_NAME_CHARS: usize = 200;

impl Status {
    /// Whether `action` may run in this status (else `409 invalid_campaign_state`).
    pub fn allows(self, action: Action) -> bool {
        use Status::*;
        match action {
            Action::Resolve => matches!(self, Draft | Ready),
            Action::Schedule | Action::Launch => matches!(self, Draft | Ready | Scheduled),
            Action::Pause => self == Running,
            Action::Resume => self == Paused,
        }
    }
}

impl PauseReason {
    /// Whether the reason is only that more messages cannot be paid for (wallet, allowance):
    /// messages already accepted were paid at acceptance, so it does not stop them.
    pub fn only_stops_new_messages(self) -> bool {
        matches!(
            self,
            PauseReason::WalletBalanceLow | PauseReason::UsageLimitReached
        )
    }
}

/// The refusal of an action in a status that does not allow it.
pub fn invalid_state(status: Status, action: Action) -> Problem {
    Problem::conflict(ConflictReason::InvalidCampaignState)
        .with_message(format!("A {status} campaign cannot {action}."))
        .with_detail("status", status.as_str())
        .with_detail("action", action.as_str())
}

impl Bucket {
    /// The bucket of a recipient whose message has `status`.
    pub fn of_message(status: MessageStatus) -> Bucket {
        match status {
            MessageStatus::Sent => Bucket::Sent,
            MessageStatus::Delivered => Bucket::Delivered,
            MessageStatus::Read => Bucket::Read,
            MessageStatus::Failed => Bucket::Failed,
            MessageStatus::Accepted | MessageStatus::Sending | MessageStatus::Received => {
                Bucket::Queued
            }
        }
    }
}

/// Who a campaign goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    ContactIds(Vec<Uuid>),
    /// Contacts with any (or, `all`, every one) of the tags.
    Tags {
        tags: Vec<String>,
        all: bool,
    },
    AllContacts,
}

/// An audience and the tags whose contacts are left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AudienceSpec {
    pub audience: Audience,
    pub exclude_tags: Vec<String>,
}

impl AudienceSpec {
    /// The API's JSON shape (stored as is).
    pub fn to_json(&self) -> Value {
        let mut v = match &self.audience {
            Audience::ContactIds(ids) => json!({"contact_ids": ids}),
            Audience::Tags { tags, all } => {
                json!({"tags": tags, "tag_match": if *all { "all" } else { "any" }})
            }
            Audience::AllContacts => json!({"all_contacts": true}),
        };
        if !self.exclude_tags.is_empty() {
            v["exclude_tags"] = json!(self.exclude_tags);
        }
        v
    }

    /// Reads the stored shape back (written by [`AudienceSpec::to_json`]).
    pub fn from_json(v: &Value) -> Option<AudienceSpec> {
        let mut errors = Vec::new();
        parse_audience(v, &mut errors).filter(|_| errors.is_empty())
    }
}

/// A contact's value a variable may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContactField {
    Name,
    Phone,
    WaId,
    Custom(String),
}

/// One template variable: the same text for everyone, or a contact's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variable {
    Literal(String),
    Field {
        field: ContactField,
        fallback: Option<String>,
    },
}

/// The template's parameters: numbered variables, or whole components (the same for every
/// recipient).
#[derive(Debug, Clone, PartialEq)]
pub enum Params {
    None,
    Variables(Vec<Variable>),
    Components(Value),
}

impl Params {
    /// The API's (and the store's) JSON: `{"variables": […]}`, `{"components": […]}` or `{}`.
    pub fn to_json(&self) -> Value {
        match self {
            Params::None => json!({}),
            Params::Variables(vars) => json!({"variables": vars.iter().map(|v| match v {
                Variable::Literal(s) => json!(s),
                Variable::Field { field, fallback } => {
                    let mut o = json!({"field": field_name(field)});
                    if let Some(f) = fallback { o["fallback"] = json!(f); }
                    o
                }
            }).collect::<Vec<_>>()}),
            Params::Components(c) => json!({"components": c}),
        }
    }

    /// Reads the stored shape back.
    pub fn from_json(v: &Value) -> Params {
        let mut errors = Vec::new();
        match v.as_object() {
            Some(o) => parse_params(o, &mut errors),
            None => Params::None,
        }
    }

    /// Whether a recipient's values depend on the contact.
    pub fn per_recipient(&self) -> bool {
        matches!(self, Params::Variables(v) if v.iter().any(|v| matches!(v, Variable::Field { .. })))
    }
}

fn field_name(f: &ContactField) -> String {
    match f {
        ContactField::Name => "name".into(),
        ContactField::Phone => "phone".into(),
        ContactField::WaId => "wa_id".into(),
        ContactField::Custom(k) => format!("custom_fields.{k}"),
    }
}

/// The body of `POST /campaigns`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCampaign {
    pub name: String,
    pub sender: Option<Sender>,
    pub template_name: String,
    pub template_language: String,
    pub params: Params,
    pub audience: AudienceSpec,
    pub expires_at: Option<i64>,
}

/// Checks a `POST /campaigns` body, naming every problem at once by its path (read with
/// [`Fields`], the reader of every body; `template` and `audience` by their own rules).
pub fn parse_create(body: &Value, now: i64) -> Result<NewCampaign, Problem> {
    let mut f = Fields::new(body)?;
    let name: Option<String> = f.required("name");
    let phone_number_id: Option<String> = f.optional("phone_number_id");
    let from: Option<String> = f.optional("from");
    let template = required_object(
        &mut f,
        "template",
        "the approved template to send ({\"name\", \"language\", \"variables\"})",
    );
    let audience = required_object(
        &mut f,
        "audience",
        "{\"contact_ids\": […]}, {\"tags\": […]} or {\"all_contacts\": true}",
    );
    let expires_at: Option<String> = f.optional("expires_at");
    // A name compared by eye: NFC, no control or invisible formatting characters.
    let name = name.and_then(|s| match crate::text::visible_name(&s) {
        Err(m) => {
            f.errors().push(FieldError::new("name", m));
            None
        }
        Ok(s) if s.trim().is_empty() => {
            f.errors()
                .push(FieldError::new("name", "must not be blank"));
            None
        }
        Ok(s) if s.chars().count() > MAX_NAME_CHARS => {
            f.errors().push(FieldError::new(
                "name",
                format!("must be at most {MAX_NAME_CHARS} characters"),
            ));
            None
        }
        Ok(s) => Some(s),
    });
    let sender = sender_from(phone_number_id, from, f.errors());
    let template = template.and_then(|t| match t {
        Value::Object(t) => Some(parse_template(&t, f.errors())),
        _ => {
            f.errors().push(FieldError::new(
                "template",
                "must be an object such as {\"name\": \"promo\", \"language\": \"en_US\", \"variables\": [{\"field\": \"name\", \"fallback\": \"there\"}]}",
            ));
            None
        }
    });
    let audience = audience.and_then(|a| parse_audience(&a, f.errors()));
    let expires_at = expires_at.and_then(|t| future_time(&t, "expires_at", now, f.errors()));
    f.finish()?;
    let (Some(name), Some((template_name, template_language, params)), Some(audience)) =
        (name, template, audience)
    else {
        // Each is reported when missing (`finish` refused the body then).
        return Err(Problem::field("body", "is not a valid campaign"));
    };
    Ok(NewCampaign {
        name,
        sender,
        template_name,
        template_language,
        params,
        audience,
        expires_at,
    })
}

/// A required member read whole (its own rules read inside it), missing explained by `help`.
fn required_object(f: &mut Fields<'_>, name: &'static str, help: &str) -> Option<Value> {
    let v: Option<Value> = f.optional(name);
    if v.is_none() {
        f.errors()
            .push(FieldError::new(name, format!("is required: {help}")));
    }
    v
}

/// The body of `POST /campaigns/{id}/schedule`: `scheduled_at` (`null` unschedules) and
/// optionally `expires_at`. `Some(None)` for `expires_at` clears it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub scheduled_at: Option<i64>,
    pub expires_at: Option<Option<i64>>,
}

/// Checks a schedule body: times in RFC 3339, in the future, expiry after the start.
pub fn parse_schedule(body: &Value, now: i64) -> Result<Schedule, Problem> {
    let mut f = Fields::new(body)?;
    let scheduled_at: Option<Option<String>> = f.nullable("scheduled_at");
    let expires_at: Option<Option<String>> = f.nullable("expires_at");
    let scheduled_at = match scheduled_at {
        None => {
            if !f.failed("scheduled_at") {
                f.errors().push(FieldError::new(
                    "scheduled_at",
                    "is required: an RFC 3339 time in the future, or null to unschedule",
                ));
            }
            None
        }
        Some(None) => None,
        Some(Some(t)) => future_time(&t, "scheduled_at", now, f.errors()),
    };
    let expires_at =
        expires_at.map(|e| e.and_then(|t| future_time(&t, "expires_at", now, f.errors())));
    if let (Some(s), Some(Some(e))) = (scheduled_at, expires_at)
        && e <= s
    {
        f.errors()
            .push(FieldError::new("expires_at", "must be after scheduled_at"));
    }
    f.finish()?;
    Ok(Schedule {
        scheduled_at,
        expires_at,
    })
}

/// An RFC 3339 time after `now`, or the problem of `field`.
fn future_time(s: &str, field: &str, now: i64, errors: &mut Vec<FieldError>) -> Option<i64> {
    match parse_rfc3339_ms(s) {
        Some(t) if t > now => Some(t),
        Some(_) => {
            errors.push(FieldError::new(field, "must be in the future"));
            None
        }
        None => {
            errors.push(FieldError::new(
                field,
                "must be an RFC 3339 time such as 2026-12-01T09:00:00Z",
            ));
            None
        }
    }
}

fn unknown(o: &Map<String, Value>, path: &str, known: &[&str], errors: &mut Vec<FieldError>) {
    for k in o.keys().filter(|k| !known.contains(&k.as_str())) {
        let field = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        errors.push(FieldError::new(field, "is not a known field"));
    }
}

fn parse_template(
    t: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> (String, String, Params) {
    unknown(
        t,
        "template",
        &["name", "language", "variables", "components"],
        errors,
    );
    let name = match t.get("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => {
            errors.push(FieldError::new("template.name", "must not be empty"));
            String::new()
        }
        Some(_) => {
            errors.push(FieldError::new("template.name", "must be a string"));
            String::new()
        }
        None => {
            errors.push(FieldError::new(
                "template.name",
                "is required: the approved template's name",
            ));
            String::new()
        }
    };
    let language = match t.get("language") {
        Some(Value::String(s)) => {
            check_language("template.language", s, errors);
            s.clone()
        }
        Some(_) => {
            errors.push(FieldError::new(
                "template.language",
                "must be a language code such as en_US",
            ));
            String::new()
        }
        None => {
            errors.push(FieldError::new(
                "template.language",
                "is required: the template's language code, such as en_US",
            ));
            String::new()
        }
    };
    if t.contains_key("variables") && t.contains_key("components") {
        errors.push(FieldError::new(
            "template.components",
            "give either variables or components, not both",
        ));
    }
    (name, language, parse_params(t, errors))
}

fn parse_params(t: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Params {
    if let Some(c) = t.get("components") {
        if !c.is_array() {
            errors.push(FieldError::new(
                "template.components",
                "must be an array of the network's template components",
            ));
        }
        return Params::Components(c.clone());
    }
    let Some(vars) = t.get("variables") else {
        return Params::None;
    };
    let Some(vars) = vars.as_array() else {
        errors.push(FieldError::new(
            "template.variables",
            "must be an array: one string or {\"field\", \"fallback\"} per numbered variable",
        ));
        return Params::None;
    };
    Params::Variables(
        vars.iter()
            .enumerate()
            .map(|(i, v)| parse_variable(v, &format!("template.variables[{i}]"), errors))
            .collect(),
    )
}

fn parse_variable(v: &Value, path: &str, errors: &mut Vec<FieldError>) -> Variable {
    match v {
        Value::String(s) => {
            if let Some(m) = value_problem(s) {
                errors.push(FieldError::new(path, m));
            }
            Variable::Literal(s.clone())
        }
        Value::Object(o) => {
            unknown(o, path, &["field", "fallback"], errors);
            let field = match o.get("field").and_then(Value::as_str) {
                Some("name") => Some(ContactField::Name),
                Some("phone") => Some(ContactField::Phone),
                Some("wa_id") => Some(ContactField::WaId),
                Some(f)
                    if f.strip_prefix("custom_fields.")
                        .is_some_and(|k| !k.is_empty()) =>
                {
                    Some(ContactField::Custom(
                        f["custom_fields.".len()..].to_string(),
                    ))
                }
                _ => {
                    errors.push(FieldError::new(
                        format!("{path}.field"),
                        "must be one of name, phone, wa_id, custom_fields.<key>",
                    ));
                    None
                }
            };
            let fallback = match o.get("fallback") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => {
                    if let Some(m) = value_problem(s) {
                        errors.push(FieldError::new(format!("{path}.fallback"), m));
                    }
                    Some(s.clone())
                }
                Some(_) => {
                    errors.push(FieldError::new(
                        format!("{path}.fallback"),
                        "must be a string",
                    ));
                    None
                }
            };
            Variable::Field {
                field: field.unwrap_or(ContactField::Name),
                fallback,
            }
        }
        _ => {
            errors.push(FieldError::new(
                path,
                "must be a string or {\"field\": \"name\", \"fallback\": \"there\"}",
            ));
            Variable::Literal(String::new())
        }
    }
}

fn string_list(v: &Value, path: &str, errors: &mut Vec<FieldError>) -> Vec<String> {
    let Some(a) = v.as_array() else {
        errors.push(FieldError::new(path, "must be an array of tags"));
        return Vec::new();
    };
    if a.len() > MAX_TAGS {
        errors.push(FieldError::new(
            path,
            format!("must hold at most {MAX_TAGS} tags"),
        ));
    }
    let mut out = Vec::new();
    for (i, t) in a.iter().enumerate() {
        match t.as_str().map(contact::normalise_tag) {
            Some(Ok(t)) => {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
            Some(Err(m)) => errors.push(FieldError::new(format!("{path}[{i}]"), m)),
            None => errors.push(FieldError::new(format!("{path}[{i}]"), "must be a string")),
        }
    }
    out
}

fn parse_audience(v: &Value, errors: &mut Vec<FieldError>) -> Option<AudienceSpec> {
    let Some(o) = v.as_object() else {
        errors.push(FieldError::new(
            "audience",
            "must be an object: {\"contact_ids\": […]}, {\"tags\": […]} or {\"all_contacts\": true}",
        ));
        return None;
    };
    unknown(
        o,
        "audience",
        &[
            "contact_ids",
            "tags",
            "tag_match",
            "all_contacts",
            "exclude_tags",
        ],
        errors,
    );
    let given: Vec<&str> = ["contact_ids", "tags", "all_contacts"]
        .into_iter()
        .filter(|k| o.contains_key(*k))
        .collect();
    if given.len() != 1 {
        errors.push(FieldError::new(
            "audience",
            "must have exactly one of contact_ids, tags, all_contacts",
        ));
        return None;
    }
    let before = errors.len();
    let audience = match given[0] {
        "contact_ids" => {
            let ids = match o.get("contact_ids").and_then(Value::as_array) {
                Some(a) => {
                    if a.is_empty() || a.len() > MAX_CONTACT_IDS {
                        errors.push(FieldError::new(
                            "audience.contact_ids",
                            format!("must hold 1 to {MAX_CONTACT_IDS} contact ids"),
                        ));
                    }
                    let mut ids = Vec::with_capacity(a.len());
                    for (i, v) in a.iter().enumerate() {
                        match v.as_str().and_then(|s| Uuid::parse_str(s).ok()) {
                            Some(id) => ids.push(id),
                            None => errors.push(FieldError::new(
                                format!("audience.contact_ids[{i}]"),
                                "must be a contact id (a UUID)",
                            )),
                        }
                    }
                    ids
                }
                None => {
                    errors.push(FieldError::new(
                        "audience.contact_ids",
                        "must be an array of contact ids",
                    ));
                    Vec::new()
                }
            };
            Audience::ContactIds(ids)
        }
        "tags" => {
            let tags = string_list(&o["tags"], "audience.tags", errors);
            if tags.is_empty() && errors.len() == before {
                errors.push(FieldError::new(
                    "audience.tags",
                    "must hold at least one tag",
                ));
            }
            let all = match o.get("tag_match") {
                None => false,
                Some(v) if v == "any" => false,
                Some(v) if v == "all" => true,
                Some(_) => {
                    errors.push(FieldError::new("audience.tag_match", "must be any or all"));
                    false
                }
            };
            Audience::Tags { tags, all }
        }
        _ => {
            if o.get("all_contacts") != Some(&Value::Bool(true)) {
                errors.push(FieldError::new("audience.all_contacts", "must be true"));
            }
            Audience::AllContacts
        }
    };
    if o.contains_key("tag_match") && !matches!(audience, Audience::Tags { .. }) {
        errors.push(FieldError::new(
            "audience.tag_match",
            "applies only with audience.tags",
        ));
    }
    let exclude_tags = match o.get("exclude_tags") {
        None => Vec::new(),
        Some(v) => string_list(v, "audience.exclude_tags", errors),
    };
    (errors.len() == before).then_some(AudienceSpec {
        audience,
        exclude_tags,
    })
}

/// What a recipient's variables are filled from.
#[derive(Debug, Clone, Copy)]
pub struct ContactValues<'a> {
    pub name: Option<&'a str>,
    /// Digits, no `+`.
    pub wa_id: Option<&'a str>,
    pub custom_fields: &'a Value,
}

/// The values of `vars` for one contact, or `None` when one would be empty (without a
/// fallback) or break the value rules (the recipient is skipped, `variable_invalid`).
pub fn fill(vars: &[Variable], c: ContactValues<'_>) -> Option<Vec<String>> {
    vars.iter()
        .map(|v| {
            let value = match v {
                Variable::Literal(s) => return Some(s.clone()),
                Variable::Field { field, fallback } => {
                    let own = match field {
                        ContactField::Name => c.name.map(str::to_string),
                        ContactField::WaId => c.wa_id.map(str::to_string),
                        ContactField::Phone => c.wa_id.map(|w| format!("+{w}")),
                        ContactField::Custom(k) => match c.custom_fields.get(k) {
                            Some(Value::String(s)) => Some(s.clone()),
                            Some(Value::Number(n)) => Some(n.to_string()),
                            Some(Value::Bool(b)) => Some(b.to_string()),
                            _ => None,
                        },
                    };
                    own.filter(|s| !s.trim().is_empty())
                        .or_else(|| fallback.clone())?
                }
            };
            value_problem(&value).is_none().then_some(value)
        })
        .collect()
}

/// The auto-pause rule on network failures: at least 20 failures that make up at least 20 %
/// of the last 100 outcomes. `last` holds whether each outcome failed, newest first.
pub fn error_threshold_reached(last: &[bool]) -> bool {
    let window = &last[..last.len().min(100)];
    let failed = window.iter().filter(|f| **f).count();
    failed >= 20 && failed * 5 >= window.len()
}

#[cfg(test)]
mod tests;
