//! One validation style for every JSON body: read each field, collect every problem by its
//! path (a missing required field by its own name, a wrong type with serde's wording and the
//! path inside the value, an unknown field by its name), let the endpoint's own rules add
//! theirs to the same list, and refuse once with all of them.
//!
//! ```text
//! let mut f = Fields::new(&body)?;
//! let phone: Option<String> = f.required("phone");
//! let name: Option<String> = f.optional("name");
//! if let Some(n) = &name { contact::check_name("name", n, f.errors()); }
//! f.finish()?;            // 400 validation_failed naming every problem
//! ```

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{FieldError, Problem};

/// A JSON object body being read.
pub struct Fields<'a> {
    obj: &'a Map<String, Value>,
    read: Vec<&'static str>,
    errors: Vec<FieldError>,
}

impl<'a> Fields<'a> {
    /// Every body of the API is an object.
    pub fn new(body: &'a Value) -> Result<Fields<'a>, Problem> {
        match body {
            Value::Object(obj) => Ok(Fields {
                obj,
                read: Vec::new(),
                errors: Vec::new(),
            }),
            _ => Err(Problem::field("body", "must be a JSON object")),
        }
    }

    fn parse<T: DeserializeOwned>(&mut self, name: &str, v: &Value) -> Option<T> {
        match serde_path_to_error::deserialize::<_, T>(v) {
            Ok(t) => Some(t),
            Err(e) => {
                let inner = e.path().to_string();
                let field = match inner.as_str() {
                    "" | "." | "?" => name.to_string(),
                    p if p.starts_with('[') => format!("{name}{p}"),
                    p => format!("{name}.{p}"),
                };
                let text = e.into_inner().to_string();
                // serde's wording, without a line/column suffix that means little here.
                let message = text.split(" at line ").next().unwrap_or(&text).to_string();
                self.errors.push(FieldError::new(field, message));
                None
            }
        }
    }

    /// A field that must be present and not null.
    pub fn required<T: DeserializeOwned>(&mut self, name: &'static str) -> Option<T> {
        self.read.push(name);
        match self.obj.get(name) {
            None => {
                self.errors.push(FieldError::new(name, "is required"));
                None
            }
            Some(Value::Null) => {
                self.errors.push(FieldError::new(name, "must not be null"));
                None
            }
            Some(v) => self.parse(name, v),
        }
    }

    /// A field that may be left out (or null).
    pub fn optional<T: DeserializeOwned>(&mut self, name: &'static str) -> Option<T> {
        self.read.push(name);
        match self.obj.get(name) {
            None | Some(Value::Null) => None,
            Some(v) => self.parse(name, v),
        }
    }

    /// A field of a partial update: left out (`None`), cleared with null (`Some(None)`) or
    /// set (`Some(Some(v))`). A value of the wrong type is reported and reads as left out.
    pub fn nullable<T: DeserializeOwned>(&mut self, name: &'static str) -> Option<Option<T>> {
        self.read.push(name);
        match self.obj.get(name) {
            None => None,
            Some(Value::Null) => Some(None),
            Some(v) => self.parse(name, v).map(Some),
        }
    }

    /// The problem list, for the endpoint's own rules.
    pub fn errors(&mut self) -> &mut Vec<FieldError> {
        &mut self.errors
    }

    /// Whether a problem was reported for `name` (or inside it).
    pub fn failed(&self, name: &str) -> bool {
        self.errors.iter().any(|e| {
            e.field == name
                || e.field
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
    }

    /// Refuses the body with every problem found, unknown fields included.
    pub fn finish(mut self) -> Result<(), Problem> {
        for k in self.obj.keys() {
            if !self.read.contains(&k.as_str()) {
                self.errors
                    .push(FieldError::new(k.clone(), "is not a known field"));
            }
        }
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(Problem::validation(self.errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(p: Problem) -> Vec<String> {
        p.details["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["field"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn every_problem_at_once_by_path() {
        let body = json!({"phone": 5, "tags": ["ok", 3], "x": 1, "name": null});
        let mut f = Fields::new(&body).unwrap();
        let phone: Option<String> = f.required("phone");
        let name: Option<String> = f.optional("name");
        let tags: Option<Vec<String>> = f.optional("tags");
        let lang: Option<String> = f.required("language");
        assert!(phone.is_none() && name.is_none() && tags.is_none() && lang.is_none());
        assert!(f.failed("tags") && !f.failed("name"));
        f.errors()
            .push(FieldError::new("components[0].text", "is required"));
        let p = f.finish().unwrap_err();
        assert_eq!(
            paths(p),
            ["phone", "tags[1]", "language", "components[0].text", "x"]
        );
    }

    #[test]
    fn nullable_tells_absent_from_null() {
        let body = json!({"name": null, "custom_fields": {"a": 1}});
        let mut f = Fields::new(&body).unwrap();
        assert_eq!(f.nullable::<String>("name"), Some(None));
        assert_eq!(f.nullable::<String>("other"), None);
        let cf: Option<Option<Map<String, Value>>> = f.nullable("custom_fields");
        assert!(cf.unwrap().is_some());
        assert!(f.finish().is_ok());
    }

    #[test]
    fn a_body_must_be_an_object_and_missing_fields_are_named() {
        assert!(Fields::new(&json!([1])).is_err());
        let body = json!({});
        let mut f = Fields::new(&body).unwrap();
        let _: Option<String> = f.required("phone");
        let p = f.finish().unwrap_err();
        assert_eq!(
            p.details["fields"][0],
            json!({"field": "phone", "message": "is required"})
        );
    }
}
