use super::*;
use serde_json::json;

const NOW: i64 = 1_800_000_000_000;

fn fields(p: &Problem) -> Vec<String> {
    p.details["fields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["field"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn actions_per_status() {
    use Status::*;
    assert!(Draft.allows(Action::Resolve) && Ready.allows(Action::Resolve));
    assert!(!Scheduled.allows(Action::Resolve));
    for s in [Draft, Ready, Scheduled] {
        assert!(s.allows(Action::Launch) && s.allows(Action::Schedule));
    }
    assert!(!Running.allows(Action::Launch) && !Completed.allows(Action::Schedule));
    assert!(Running.allows(Action::Pause) && !Paused.allows(Action::Pause));
    assert!(Paused.allows(Action::Resume) && !Running.allows(Action::Resume));
    let p = invalid_state(Completed, Action::Pause);
    assert_eq!(p.details["reason"], "invalid_campaign_state");
    assert_eq!(p.details["status"], "completed");
}

#[test]
fn create_names_every_problem() {
    let body = json!({
        "name": "",
        "template": {"name": "", "language": "english", "variables": [5, {"field": "age"}, "a\tb"]},
        "audience": {"contact_ids": ["x"], "tags": ["a"]},
        "expires_at": "2020-01-01T00:00:00Z",
        "colour": "red"
    });
    let p = parse_create(&body, NOW).unwrap_err();
    let f = fields(&p);
    for want in [
        "name",
        "template.name",
        "template.language",
        "template.variables[0]",
        "template.variables[1].field",
        "template.variables[2]",
        "audience",
        "expires_at",
        "colour",
    ] {
        assert!(f.contains(&want.to_string()), "{want} missing in {f:?}");
    }
}

#[test]
fn create_reads_through_fields_every_problem_by_path() {
    // Wrong types at the top level (Fields' wording) and inside `template` and `audience`
    // (their own rules), all in one answer; unknown members at every level.
    let body = json!({
        "name": 5,
        "phone_number_id": "",
        "template": {"name": "promo", "language": "en_US", "variables": "x", "colour": 1},
        "audience": {"tags": ["ok", 3], "exclude_tags": "vip"},
        "expires_at": 7,
        "x": 1
    });
    let p = parse_create(&body, NOW).unwrap_err();
    assert_eq!(p.code, crate::ErrorCode::ValidationFailed);
    let mut f = fields(&p);
    f.sort();
    assert_eq!(
        f,
        [
            "audience.exclude_tags",
            "audience.tags[1]",
            "expires_at",
            "name",
            "phone_number_id",
            "template.colour",
            "template.variables",
            "x",
        ]
    );
    // Missing members are named with what they take.
    let p = parse_create(&json!({}), NOW).unwrap_err();
    assert_eq!(fields(&p), ["name", "template", "audience"]);
    assert!(
        p.details["fields"][1]["message"]
            .as_str()
            .unwrap()
            .starts_with("is required: ")
    );
    // `null` is leaving an optional member out.
    let c = parse_create(
        &json!({"name": "n", "template": {"name": "t", "language": "en"},
                "audience": {"all_contacts": true}, "expires_at": null, "from": null}),
        NOW,
    )
    .unwrap();
    assert_eq!((c.expires_at, c.sender), (None, None));
    assert_eq!(
        parse_create(&json!([]), NOW).unwrap_err().details["fields"][0]["field"],
        "body"
    );
}

#[test]
fn create_reads_a_good_body() {
    let body = json!({
        "name": "Spring sale",
        "phone_number_id": "PN1",
        "template": {"name": "promo", "language": "en_US",
                     "variables": ["10%", {"field": "name", "fallback": "there"}, {"field": "custom_fields.city"}]},
        "audience": {"tags": ["vip", "vip", "new"], "tag_match": "all", "exclude_tags": ["blocked"]}
    });
    let c = parse_create(&body, NOW).unwrap();
    assert_eq!(c.sender, Some(Sender::PhoneNumberId("PN1".into())));
    assert_eq!(
        c.audience.audience,
        Audience::Tags {
            tags: vec!["vip".into(), "new".into()],
            all: true
        }
    );
    assert_eq!(c.audience.exclude_tags, vec!["blocked".to_string()]);
    assert!(c.params.per_recipient());
    // Stored and read back unchanged.
    assert_eq!(Params::from_json(&c.params.to_json()), c.params);
    assert_eq!(
        AudienceSpec::from_json(&c.audience.to_json()),
        Some(c.audience)
    );
}

#[test]
fn audience_shapes() {
    let ok = |a: Value| {
        parse_create(
            &json!({"name": "n", "template": {"name": "t", "language": "en"}, "audience": a}),
            NOW,
        )
    };
    assert!(ok(json!({"all_contacts": true})).is_ok());
    assert!(ok(json!({"contact_ids": [uuid::Uuid::nil()]})).is_ok());
    assert!(
        fields(&ok(json!({"all_contacts": false})).unwrap_err())
            .contains(&"audience.all_contacts".into())
    );
    assert!(
        fields(&ok(json!({"contact_ids": []})).unwrap_err())
            .contains(&"audience.contact_ids".into())
    );
    assert!(fields(&ok(json!({"tags": []})).unwrap_err()).contains(&"audience.tags".into()));
    assert!(
        fields(&ok(json!({"tags": ["a"], "tag_match": "most"})).unwrap_err())
            .contains(&"audience.tag_match".into())
    );
    assert!(fields(&ok(json!({})).unwrap_err()).contains(&"audience".into()));
}

#[test]
fn variables_fill_with_fields_and_fallbacks() {
    let vars = vec![
        Variable::Literal("10%".into()),
        Variable::Field {
            field: ContactField::Name,
            fallback: Some("there".into()),
        },
        Variable::Field {
            field: ContactField::Phone,
            fallback: None,
        },
        Variable::Field {
            field: ContactField::Custom("city".into()),
            fallback: None,
        },
    ];
    let cf = json!({"city": "Lyon"});
    let c = ContactValues {
        name: None,
        wa_id: Some("447700900123"),
        custom_fields: &cf,
    };
    assert_eq!(
        fill(&vars, c).unwrap(),
        vec!["10%", "there", "+447700900123", "Lyon"]
    );
    let empty = json!({});
    let c = ContactValues {
        name: Some("Ada"),
        wa_id: Some("1"),
        custom_fields: &empty,
    };
    assert_eq!(fill(&vars, c), None, "no city and no fallback");
    let bad = json!({"city": "a\nb"});
    let c = ContactValues {
        name: Some("Ada"),
        wa_id: Some("1"),
        custom_fields: &bad,
    };
    assert_eq!(fill(&vars, c), None, "a value with a new line");
}

#[test]
fn schedule_body() {
    let s = parse_schedule(&json!({"scheduled_at": "2030-01-01T00:00:00Z"}), NOW).unwrap();
    assert!(s.scheduled_at.is_some() && s.expires_at.is_none());
    assert_eq!(
        parse_schedule(&json!({"scheduled_at": null}), NOW)
            .unwrap()
            .scheduled_at,
        None
    );
    let p = parse_schedule(&json!({"scheduled_at": "2020-01-01T00:00:00Z"}), NOW).unwrap_err();
    assert_eq!(fields(&p), vec!["scheduled_at"]);
    let p = parse_schedule(
        &json!({"scheduled_at": "2030-01-02T00:00:00Z", "expires_at": "2030-01-01T00:00:00Z"}),
        NOW,
    )
    .unwrap_err();
    assert_eq!(fields(&p), vec!["expires_at"]);
    assert_eq!(
        fields(&parse_schedule(&json!({}), NOW).unwrap_err()),
        ["scheduled_at"]
    );
    // Every problem at once: a wrong type named once, an unknown member.
    let p = parse_schedule(
        &json!({"scheduled_at": 5, "expires_at": "soon", "at": 1}),
        NOW,
    )
    .unwrap_err();
    assert_eq!(fields(&p), ["scheduled_at", "expires_at", "at"]);
    let s = parse_schedule(&json!({"scheduled_at": null, "expires_at": null}), NOW).unwrap();
    assert_eq!((s.scheduled_at, s.expires_at), (None, Some(None)));
}

#[test]
fn error_threshold_needs_twenty_failures_and_a_fifth() {
    let mut last = vec![false; 100];
    for f in last.iter_mut().take(19) {
        *f = true;
    }
    assert!(!error_threshold_reached(&last));
    last[50] = true;
    assert!(error_threshold_reached(&last));
    // 20 failures among 25 outcomes.
    let few: Vec<bool> = (0..25).map(|i| i < 20).collect();
    assert!(error_threshold_reached(&few));
    // Only the newest 100 count.
    let mut old = vec![false; 100];
    old.extend(vec![true; 50]);
    assert!(!error_threshold_reached(&old));
}

#[test]
fn buckets_of_message_statuses() {
    use crate::message::Status as M;
    assert_eq!(Bucket::of_message(M::Accepted), Bucket::Queued);
    assert_eq!(Bucket::of_message(M::Sending), Bucket::Queued);
    assert_eq!(Bucket::of_message(M::Read), Bucket::Read);
    assert_eq!(Bucket::of_message(M::Failed), Bucket::Failed);
}
