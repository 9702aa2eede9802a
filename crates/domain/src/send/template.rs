//! The `template` object of a send (its values are matched against the approved template later).

use super::*;

use crate::FieldError;
use crate::template;
use serde_json::{Value, json};

pub(super) fn parse_template(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let o = object(
        v,
        "template",
        "{\"name\": \"order_update\", \"language\": \"en_US\", \"variables\": [\"Ada\"]}",
        errors,
    )?;
    let before = errors.len();
    unknown_keys(
        o,
        "template",
        &["name", "language", "variables", "components", "coupon_code"],
        errors,
    );
    let name = req_str(
        o,
        "template",
        "name",
        "the approved template's name",
        errors,
    );
    if name.is_some_and(|n| n.trim().is_empty()) {
        errors.push(FieldError::new("template.name", "must not be empty"));
    }
    let language = match get(o, "language") {
        None => {
            errors.push(FieldError::new(
                "template.language",
                "is required: the template's language code, such as en_US",
            ));
            None
        }
        Some(Value::String(s)) => {
            template::check_language("template.language", s, errors);
            Some(s.as_str())
        }
        Some(Value::Object(l)) => {
            unknown_keys(l, "template.language", &["code", "policy"], errors);
            if get(l, "policy").is_some_and(|p| p.as_str() != Some("deterministic")) {
                errors.push(FieldError::new(
                    "template.language.policy",
                    "must be \"deterministic\"",
                ));
            }
            let code = req_str(
                l,
                "template.language",
                "code",
                "the template's language code, such as en_US",
                errors,
            );
            if let Some(c) = code {
                template::check_language("template.language.code", c, errors);
            }
            code
        }
        Some(_) => {
            errors.push(FieldError::new(
                "template.language",
                "must be a language code such as en_US (or {\"code\": \"en_US\"})",
            ));
            None
        }
    };
    // Variables: non-strings are reported here and stood in for by a valid value, so the
    // shape rules below keep their indexes.
    let variables: Option<Vec<String>> = match get(o, "variables") {
        None => None,
        Some(Value::Array(a)) => Some(
            a.iter()
                .enumerate()
                .map(|(i, v)| match v.as_str() {
                    Some(s) => s.to_string(),
                    None => {
                        errors.push(FieldError::new(
                            format!("template.variables[{i}]"),
                            "must be a string",
                        ));
                        "x".to_string()
                    }
                })
                .collect(),
        ),
        Some(_) => {
            errors.push(FieldError::new(
                "template.variables",
                "must be an array of strings, one per numbered variable {{1}}, {{2}}, …",
            ));
            Some(Vec::new())
        }
    };
    let components = get(o, "components");
    let coupon = match get(o, "coupon_code") {
        None => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => {
            errors.push(FieldError::new("template.coupon_code", "must be a string"));
            None
        }
    };
    errors.extend(template::send_shape_problems(
        variables.as_deref(),
        components,
        coupon,
    ));
    if errors.len() != before {
        return None;
    }
    let (name, language) = (name?, language?);
    let mut content = json!({"name": name, "language": {"code": language}});
    if let Some(c) = components {
        content["components"] = c.clone();
    }
    Some(Parsed {
        text: None,
        media: None,
        template: Some(TemplateSend {
            name: name.to_string(),
            language: language.to_string(),
            variables,
            components: components.cloned(),
            coupon_code: coupon.map(str::to_string),
        }),
        content,
    })
}
