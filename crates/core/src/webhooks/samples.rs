//! The `data` of test events (`POST /webhook-subscriptions/{id}/test`): `webhook.test`
//! names the subscription; a sample of another type has exactly the shape that type's real
//! events carry (built from the same views), with placeholder values a receiver can tell
//! apart: nil UUIDs, `wamid.TEST`, the example number +15550000000.

use serde_json::{Value, json};
use tern_domain::events::EventType;
use tern_domain::time::format_ms;
use uuid::Uuid;

use crate::views;

/// The `data` of a test event of `kind`.
pub fn data(kind: EventType, subscription_id: Uuid, now: i64) -> Value {
    let at = format_ms(now);
    let nil = Uuid::nil().to_string();
    let message = |inbound: bool, status: &str| views::Message {
        id: nil.clone(),
        conversation_id: nil.clone(),
        contact_id: nil.clone(),
        phone_number_id: "100000000000000".into(),
        direction: if inbound { "inbound" } else { "outbound" }.into(),
        r#type: "text".into(),
        status: status.into(),
        template_name: None,
        text: Some("This is a test event from Tern.".into()),
        media_id: None,
        wamid: Some("wamid.TEST".into()),
        campaign_id: None,
        created_at: at.clone(),
        sent_at: (!inbound).then(|| at.clone()),
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        content: Some(json!({"body": "This is a test event from Tern."})),
        reply_to: None,
        referral: None,
        edited_at: None,
        revoked_at: None,
        pricing: None,
    };
    let value = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    match kind {
        EventType::WebhookTest => json!({
            "subscription_id": subscription_id.to_string(),
            "message": "This is a test event from Tern.",
        }),
        EventType::MessageStatus => value(serde_json::to_value(message(false, "sent"))),
        EventType::MessageReceived => value(serde_json::to_value(message(true, "received"))),
        EventType::MessageUpdated => {
            let mut m = message(true, "received");
            m.edited_at = Some(at.clone());
            value(serde_json::to_value(m))
        }
        EventType::TemplateStatus => value(serde_json::to_value(views::Template {
            id: nil.clone(),
            name: "test_template".into(),
            language: "en_US".into(),
            category: "utility".into(),
            status: "approved".into(),
            components: json!([{"type": "BODY", "text": "This is a test event from Tern."}]),
            rejection_reason: None,
            waba_id: "100000000000001".into(),
            example: json!({
                "to": "+<RECIPIENT_PHONE>",
                "type": "template",
                "template": {"name": "test_template", "language": "en_US"},
            }),
            created_at: at.clone(),
            updated_at: at.clone(),
        })),
        EventType::ContactConsent => value(serde_json::to_value(views::Contact {
            id: nil.clone(),
            wa_id: Some("15550000000".into()),
            phone: Some("+15550000000".into()),
            user_id: None,
            parent_user_id: None,
            username: None,
            name: Some("Test Contact".into()),
            custom_fields: json!({}),
            tags: Vec::new(),
            consent: views::Consent {
                status: "opted_in".into(),
                updated_at: Some(at.clone()),
                source: Some("test".into()),
            },
            last_inbound_at: None,
            blocked_at: None,
            created_at: at.clone(),
            updated_at: at.clone(),
        })),
        EventType::CampaignStatus => {
            let sample = tern_store::Campaign {
                id: Uuid::nil(),
                org_id: Uuid::nil(),
                name: "Test campaign".into(),
                status: tern_domain::campaign::Status::Running,
                template_name: "test_template".into(),
                template_language: "en_US".into(),
                phone_number_id: "100000000000000".into(),
                audience: tern_store::Json(json!({"tags": ["test"], "tag_match": "any"})),
                params: tern_store::Json(
                    json!({"variables": [{"field": "name", "fallback": "there"}]}),
                ),
                scheduled_at: None,
                expires_at: None,
                recipient_count: Some(1),
                pause_reason: None,
                resolved_at: Some(now),
                launched_at: Some(now),
                paused_at: None,
                completed_at: None,
                created_at: now,
                updated_at: now,
                estimated_cost_minor: Some(0),
            };
            let counts = tern_store::CampaignCounts {
                pending: 1,
                ..Default::default()
            };
            serde_json::to_value(crate::campaigns::view::Campaign::new(&sample, counts))
                .unwrap_or_default()
        }
    }
}
