//! Message templates: storage, review, status and category changes (with their webhooks),
//! and the Graph endpoints `POST|GET|DELETE /{version}/{waba}/message_templates`.

use std::sync::Arc;
use std::time::Duration;

use axum::{
    Json,
    extract::{Path, Query, State},
    http::HeaderMap,
    response::{IntoResponse, Response},
};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::cloud::{authorize_waba, check_version, graph};
use crate::config::ReviewMode;
use crate::graph::GraphErr;
use crate::model::{Number, TemplateRec, TemplateSeed};
use crate::state::{CtlError, OutKind, Sim};

const CATEGORIES: [&str; 3] = ["MARKETING", "UTILITY", "AUTHENTICATION"];
/// Templates per WABA of an unverified portfolio (reference §5).
const TEMPLATE_LIMIT: usize = 250;

impl Sim {
    /// Store a template (from the Graph endpoint or the control API).
    pub fn insert_template(&self, seed: TemplateSeed) -> TemplateRec {
        let mut st = self.lock();
        let id = st.random_digits(15);
        let format = seed.parameter_format.unwrap_or_else(|| {
            // named if any {{name}} placeholder is not a number
            let named = seed.components.iter().any(|c| {
                c.get("text")
                    .and_then(Value::as_str)
                    .map(crate::validate::placeholders)
                    .is_some_and(|p| p.iter().any(|n| n.parse::<u32>().is_err()))
            });
            if named { "named" } else { "positional" }.to_owned()
        });
        let rec = TemplateRec {
            id,
            waba_id: seed.waba_id,
            name: seed.name,
            language: seed.language,
            category: seed.category.to_uppercase(),
            status: seed.status.to_uppercase(),
            parameter_format: format.to_lowercase(),
            components: seed.components,
            rejected_reason: None,
            previous_category: None,
        };
        st.templates.push(rec.clone());
        rec
    }

    /// Schedule the automatic review of a freshly created template. With magic recipients
    /// the approve mode reviews by name: `reject_…` is rejected.
    pub fn schedule_review(self: &Arc<Self>, template: &TemplateRec) {
        let event = match self.args.template_review {
            ReviewMode::Approve if self.rejects_by_name(&template.name) => {
                ("REJECTED", "INVALID_FORMAT")
            }
            ReviewMode::Approve => ("APPROVED", "NONE"),
            ReviewMode::Reject => ("REJECTED", "INVALID_FORMAT"),
            ReviewMode::Manual => return,
        };
        let delay = Duration::from_millis(self.args.review_delay_ms());
        let template_id = template.id.clone();
        let sim = Arc::clone(self);
        self.spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = sim.set_template_status(&template_id, event.0, Some(event.1.to_owned()));
        });
    }

    /// Change a template's status and send `message_template_status_update`.
    pub fn set_template_status(
        &self,
        id: &str,
        event: &str,
        reason: Option<String>,
    ) -> Result<TemplateRec, CtlError> {
        let event = event.to_uppercase();
        let new_status = match event.as_str() {
            "REINSTATED" | "UNARCHIVED" => "APPROVED",
            "FLAGGED" => "APPROVED", // flagged templates stay sendable until paused
            other => other,
        }
        .to_owned();
        let mut st = self.lock();
        let t = st
            .templates
            .iter_mut()
            .find(|t| t.id == id)
            .ok_or_else(|| CtlError::not_found(format!("unknown template {id}")))?;
        t.status = new_status;
        t.rejected_reason = (event == "REJECTED")
            .then(|| reason.clone().unwrap_or_else(|| "INVALID_FORMAT".into()));
        let rec = t.clone();
        drop(st);
        let reason_value = match (&reason, event.as_str()) {
            (_, "PENDING_DELETION") => Value::Null,
            (Some(r), _) => json!(r),
            (None, _) => json!("NONE"),
        };
        let value = json!({
            "event": event,
            "message_template_id": template_id_value(&rec.id),
            "message_template_name": rec.name,
            "message_template_language": rec.language,
            "message_template_category": rec.category,
            "reason": reason_value,
        });
        self.queue(
            &self.waba_number(&rec.waba_id),
            OutKind::Field {
                field: "message_template_status_update",
                value,
            },
        );
        Ok(rec)
    }

    /// Change a template's category (as the network's re-categorisation does) and send
    /// `template_category_update`.
    pub fn set_template_category(&self, id: &str, category: &str) -> Result<TemplateRec, CtlError> {
        let category = category.to_uppercase();
        if !CATEGORIES.contains(&category.as_str()) {
            return Err(CtlError::bad_request(format!(
                "category must be one of {}",
                CATEGORIES.join(", ")
            )));
        }
        let mut st = self.lock();
        let t = st
            .templates
            .iter_mut()
            .find(|t| t.id == id)
            .ok_or_else(|| CtlError::not_found(format!("unknown template {id}")))?;
        if t.category == category {
            return Err(CtlError::bad_request(format!(
                "template {id} already is {category}"
            )));
        }
        let previous = std::mem::replace(&mut t.category, category.clone());
        t.previous_category = Some(previous.clone());
        let rec = t.clone();
        drop(st);
        let value = json!({
            "message_template_id": template_id_value(&rec.id),
            "message_template_name": rec.name,
            "message_template_language": rec.language,
            "previous_category": previous,
            "new_category": category,
        });
        self.queue(
            &self.waba_number(&rec.waba_id),
            OutKind::Field {
                field: "template_category_update",
                value,
            },
        );
        Ok(rec)
    }

    /// A number of the WABA, for per-WABA webhooks (a placeholder when it has none: the
    /// envelope only needs the WABA id).
    fn waba_number(&self, waba_id: &str) -> Number {
        let st = self.lock();
        let mut numbers: Vec<&Number> = st
            .numbers
            .values()
            .filter(|n| n.waba_id == waba_id)
            .collect();
        numbers.sort_by(|a, b| a.id.cmp(&b.id));
        numbers.first().map_or_else(
            || Number {
                id: String::new(),
                display_phone_number: String::new(),
                waba_id: waba_id.to_owned(),
                access_token: String::new(),
                throughput_mps: 0,
                verified_name: String::new(),
                quality_rating: String::new(),
                status: String::new(),
                pair_burst: 0,
                pair_period_ms: 0,
            },
            |n| (*n).clone(),
        )
    }
}

/// Webhooks carry template ids as numbers.
fn template_id_value(id: &str) -> Value {
    id.parse::<u64>().map_or_else(|_| json!(id), Value::from)
}

// ---- Graph endpoints ------------------------------------------------------------------------

pub async fn create_template(
    State(sim): State<Arc<Sim>>,
    Path((version, waba)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let r = (|| {
        check_version(&version)?;
        authorize_waba(&sim, &headers, &waba, "post")?;
        let v: Value = serde_json::from_slice(&body).map_err(|_| {
            GraphErr::invalid_param("Invalid parameter").details("Body is not valid JSON.")
        })?;
        let name = v.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty()
            || name.len() > 512
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(GraphErr::invalid_param("Invalid parameter").details(
                "Template name must be 1-512 characters: lowercase letters, digits and underscores.",
            ));
        }
        let language = v
            .get("language")
            .and_then(Value::as_str)
            .filter(|l| !l.is_empty())
            .ok_or_else(|| GraphErr::invalid_param("The parameter language is required."))?;
        let category = v
            .get("category")
            .and_then(Value::as_str)
            .map(str::to_uppercase)
            .filter(|c| CATEGORIES.contains(&c.as_str()))
            .ok_or_else(|| {
                GraphErr::invalid_param(
                    "Param category must be one of {MARKETING, UTILITY, AUTHENTICATION}.",
                )
            })?;
        let components = v
            .get("components")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| GraphErr::invalid_param("The parameter components is required."))?;
        let has_body = components.iter().any(|c| {
            c.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case("body"))
        });
        if !has_body {
            return Err(GraphErr::invalid_param("Invalid parameter")
                .details("A BODY component is required."));
        }
        let format = match v.get("parameter_format").and_then(Value::as_str) {
            None => None,
            Some(f) if f.eq_ignore_ascii_case("positional") || f.eq_ignore_ascii_case("named") => {
                Some(f.to_lowercase())
            }
            Some(_) => {
                return Err(GraphErr::invalid_param(
                    "Param parameter_format must be one of {POSITIONAL, NAMED}.",
                ));
            }
        };
        let duplicate = sim
            .lock()
            .templates
            .iter()
            .any(|t| t.waba_id == waba && t.name == name && t.language == language);
        if duplicate {
            let mut e = GraphErr::invalid_param("Invalid parameter").details(format!(
                "Content in this language already exists for {name} ({language})."
            ));
            e.subcode = Some(2_388_024);
            return Err(e);
        }
        let rec = sim.insert_template(TemplateSeed {
            waba_id: waba.clone(),
            name: name.to_owned(),
            language: language.to_owned(),
            category,
            status: "PENDING".into(),
            parameter_format: format,
            components,
        });
        Ok(rec)
    })();
    match r {
        Ok(rec) => {
            sim.schedule_review(&rec);
            Json(json!({"id": rec.id, "status": rec.status, "category": rec.category}))
                .into_response()
        }
        Err(e) => graph(&sim, e),
    }
}

pub async fn list_templates(
    State(sim): State<Arc<Sim>>,
    Path((version, waba)): Path<(String, String)>,
    Query(q): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let r = (|| {
        check_version(&version)?;
        authorize_waba(&sim, &headers, &waba, "get")?;
        let param = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let limit = match param("limit") {
            None => 25,
            Some(l) => l
                .parse::<usize>()
                .ok()
                .filter(|l| (1..=1000).contains(l))
                .ok_or_else(|| {
                    GraphErr::invalid_param("Param limit must be a positive integer.")
                })?,
        };
        let start = match param("after") {
            None => 0,
            Some(c) => {
                decode_cursor(c).ok_or_else(|| GraphErr::invalid_param("Invalid cursor."))?
            }
        };
        let st = sim.lock();
        let all: Vec<&crate::model::TemplateRec> = st
            .templates
            .iter()
            .filter(|t| t.waba_id == waba)
            .filter(|t| param("name").is_none_or(|n| t.name == n))
            .filter(|t| param("status").is_none_or(|s| t.status.eq_ignore_ascii_case(s)))
            .collect();
        let page: Vec<Value> = all
            .iter()
            .skip(start)
            .take(limit)
            .map(|t| {
                let mut v = json!({
                    "id": t.id,
                    "name": t.name,
                    "language": t.language,
                    "status": t.status,
                    "category": t.category,
                    "parameter_format": t.parameter_format.to_uppercase(),
                    "components": t.components,
                    "rejected_reason": t.rejected_reason.clone().unwrap_or_else(|| "NONE".into()),
                });
                if let Some(p) = &t.previous_category {
                    v["previous_category"] = json!(p);
                }
                v
            })
            .collect();
        let end = start + page.len();
        let mut paging =
            json!({"cursors": {"before": encode_cursor(start), "after": encode_cursor(end)}});
        if end < all.len() {
            paging["next"] = json!(format!(
                "{}/{version}/{waba}/message_templates?limit={limit}&after={}",
                sim.public_url,
                encode_cursor(end)
            ));
        }
        let mut answer = json!({"data": page, "paging": paging});
        // `?summary=total_count,…`: the network adds the WABA's counts (every field, whichever
        // were asked for).
        if param("summary").is_some_and(|s| !s.is_empty() && s != "false") {
            let in_waba = st.templates.iter().filter(|t| t.waba_id == waba).count();
            answer["summary"] = json!({
                "total_count": all.len(),
                "message_template_count": in_waba,
                "message_template_limit": TEMPLATE_LIMIT,
                "are_translations_complete": true,
            });
        }
        Ok(Json(answer).into_response())
    })();
    r.unwrap_or_else(|e| graph(&sim, e))
}

pub async fn delete_template(
    State(sim): State<Arc<Sim>>,
    Path((version, waba)): Path<(String, String)>,
    Query(q): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let r = (|| {
        check_version(&version)?;
        authorize_waba(&sim, &headers, &waba, "delete")?;
        let param = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let name = param("name")
            .ok_or_else(|| GraphErr::invalid_param("The parameter name is required."))?;
        let hsm = param("hsm_id");
        let mut st = sim.lock();
        let before = st.templates.len();
        st.templates
            .retain(|t| !(t.waba_id == waba && t.name == name && hsm.is_none_or(|h| t.id == h)));
        if st.templates.len() == before {
            return Err(GraphErr::invalid_param("Invalid parameter")
                .details(format!("Template {name} not found.")));
        }
        Ok(Json(json!({"success": true})).into_response())
    })();
    r.unwrap_or_else(|e| graph(&sim, e))
}

fn encode_cursor(i: usize) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(i.to_string())
}

fn decode_cursor(c: &str) -> Option<usize> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .ok()?;
    std::str::from_utf8(&raw).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        assert_eq!(decode_cursor(&encode_cursor(42)), Some(42));
        assert_eq!(decode_cursor("!!"), None);
    }
}
