//! Text, location, contact cards and reactions.

use super::*;

use crate::FieldError;
use serde_json::Value;

pub(super) fn parse_text(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let o = object(v, "text", "{\"body\": \"Hello\"}", errors)?;
    let before = errors.len();
    unknown_keys(o, "text", &["body", "preview_url"], errors);
    opt_bool(o, "text", "preview_url", errors);
    let body = req_str(
        o,
        "text",
        "body",
        "the message text, 1 to 4096 characters",
        errors,
    )
    .and_then(|b| bounded_text(b, "text.body", MAX_TEXT_CHARS, errors));
    let body = body.filter(|_| errors.len() == before)?;
    Some(Parsed {
        text: Some(body.to_string()),
        media: None,
        template: None,
        content: without_nulls(o),
    })
}

pub(super) fn parse_location(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let o = object(
        v,
        "location",
        "{\"latitude\": 51.5, \"longitude\": -0.12}",
        errors,
    )?;
    let before = errors.len();
    unknown_keys(
        o,
        "location",
        &["latitude", "longitude", "name", "address"],
        errors,
    );
    for (key, max) in [("latitude", 90.0), ("longitude", 180.0)] {
        let p = format!("location.{key}");
        match get(o, key) {
            None => errors.push(FieldError::new(
                p,
                format!("is required: a number between -{max} and {max}"),
            )),
            Some(n) => {
                if !n.as_f64().is_some_and(|x| (-max..=max).contains(&x)) {
                    errors.push(FieldError::new(
                        p,
                        format!("must be a number between -{max} and {max}"),
                    ));
                }
            }
        }
    }
    opt_str(o, "location", "name", errors);
    opt_str(o, "location", "address", errors);
    (errors.len() == before).then(|| Parsed::content(without_nulls(o)))
}

pub(super) fn parse_contacts(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let Some(list) = v.as_array() else {
        errors.push(FieldError::new(
            "contacts",
            "must be an array of contact cards such as [{\"name\": {\"formatted_name\": \"Ada Lovelace\"}, \"phones\": [{\"phone\": \"+14155550123\"}]}]",
        ));
        return None;
    };
    let before = errors.len();
    if list.is_empty() {
        errors.push(FieldError::new(
            "contacts",
            "must hold at least one contact card",
        ));
    } else if list.len() > MAX_CONTACTS {
        errors.push(FieldError::new(
            "contacts",
            format!("may hold at most {MAX_CONTACTS} contact cards"),
        ));
    }
    for (i, c) in list.iter().enumerate() {
        let p = format!("contacts[{i}]");
        let Some(c) = c.as_object() else {
            errors.push(FieldError::new(
                p,
                "must be an object with name.formatted_name",
            ));
            continue;
        };
        match get(c, "name") {
            None => errors.push(FieldError::new(
                format!("{p}.name"),
                "is required: an object with formatted_name, the name shown for the contact",
            )),
            Some(Value::Object(name)) => {
                let np = format!("{p}.name");
                if let Some(f) = req_str(
                    name,
                    &np,
                    "formatted_name",
                    "the name shown for the contact",
                    errors,
                ) && f.trim().is_empty()
                {
                    errors.push(FieldError::new(
                        format!("{np}.formatted_name"),
                        "must not be empty",
                    ));
                }
            }
            Some(_) => errors.push(FieldError::new(
                format!("{p}.name"),
                "must be an object with formatted_name",
            )),
        }
        for key in ["phones", "emails", "addresses", "urls"] {
            if get(c, key).is_some_and(|v| !v.is_array()) {
                errors.push(FieldError::new(format!("{p}.{key}"), "must be an array"));
            }
        }
        if get(c, "org").is_some_and(|v| !v.is_object()) {
            errors.push(FieldError::new(format!("{p}.org"), "must be an object"));
        }
        opt_str(c, &p, "birthday", errors);
    }
    (errors.len() == before).then(|| Parsed::content(v.clone()))
}

pub(super) fn parse_reaction(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let o = object(
        v,
        "reaction",
        "{\"message_id\": \"wamid.…\", \"emoji\": \"👍\"}",
        errors,
    )?;
    let before = errors.len();
    unknown_keys(o, "reaction", &["message_id", "emoji"], errors);
    if let Some(id) = req_str(
        o,
        "reaction",
        "message_id",
        "the id (wamid.…) of the message to react to",
        errors,
    ) {
        check_message_id(id, "reaction.message_id", errors);
    }
    req_str(
        o,
        "reaction",
        "emoji",
        "an emoji, or \"\" to remove the reaction",
        errors,
    );
    (errors.len() == before).then(|| Parsed::content(without_nulls(o)))
}
