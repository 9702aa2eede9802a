//! Reading a core refusal for a form: the words to show next to each field.

use tern_domain::Problem;

/// The field problems of a refusal, as (field path, words); empty when it names no field.
pub fn field_problems(p: &Problem) -> Vec<(String, String)> {
    p.details
        .get("fields")
        .and_then(|f| f.as_array())
        .map(|fields| {
            fields
                .iter()
                .filter_map(|f| {
                    Some((
                        f.get("field")?.as_str()?.to_string(),
                        f.get("message")?.as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The words of a refusal for a person: the field's own words when it names one field,
/// else the problem's message.
pub fn words(p: &Problem) -> String {
    match field_problems(p).as_slice() {
        [(_, w)] => w.clone(),
        _ => p.message.clone(),
    }
}

/// The words for `field` among a refusal's field problems.
pub fn words_for(p: &Problem, field: &str) -> Option<String> {
    field_problems(p)
        .into_iter()
        .find(|(f, _)| f == field)
        .map(|(_, w)| w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_field_gives_its_words() {
        let p = Problem::field("password", "Use at least 12 characters.");
        assert_eq!(words(&p), "Use at least 12 characters.");
        assert_eq!(
            words_for(&p, "password").as_deref(),
            Some("Use at least 12 characters.")
        );
        assert_eq!(words_for(&p, "name"), None);
        let p = Problem::not_found().with_message("gone");
        assert_eq!(words(&p), "gone");
    }
}
