//! Injected inbound messages and media.

use crate::common::*;

#[tokio::test]
async fn media_upload_info_download_and_inbound_media() {
    let e = env().await;
    let id = e
        .client
        .upload_media(
            PNID,
            TOKEN,
            Bytes::from_static(b"%PDF-1.4 test"),
            "application/pdf",
            "a.pdf",
        )
        .await
        .unwrap();
    let info = e.client.get_media(&id, TOKEN).await.unwrap();
    assert_eq!(info.mime_type.as_deref(), Some("application/pdf"));
    assert_eq!(info.file_size, Some(13));
    let bytes = e.client.download_media(&info.url, TOKEN).await.unwrap();
    assert_eq!(&bytes[..], b"%PDF-1.4 test");
    // the download URL needs the token
    let r = reqwest::get(&info.url).await.unwrap();
    assert_eq!(r.status(), 401);

    let err = e
        .client
        .upload_media(
            PNID,
            TOKEN,
            Bytes::from_static(b"x"),
            "application/x-msdownload",
            "a.exe",
        )
        .await
        .unwrap_err();
    assert_eq!(err.graph().unwrap().code, Some(131053));

    // inbound image: media id usable with GET /{media-id}
    e.sim
        .inject_inbound(
            json!({"phone_number_id": PNID, "from": CUSTOMER, "profile_name": "Ann",
            "type": "image", "image": {"caption": "look", "mime_type": "image/png"},
            "media_base64": "iVBORw0KGgo="}),
        )
        .unwrap();
    e.rx.wait_until("inbound image", |ns| {
        ns.iter()
            .any(|n| n.messages_values().any(|(_, v)| !v.messages.is_empty()))
    })
    .await;
    let media_id = {
        let bodies = e.rx.bodies.lock().unwrap();
        let (_, v) = bodies
            .iter()
            .find_map(|n| n.messages_values().next())
            .unwrap();
        assert_eq!(v.profile_name(CUSTOMER), Some("Ann"));
        match &v.messages[0].content {
            InboundContent::Image(m) => {
                assert_eq!(m.caption.as_deref(), Some("look"));
                assert!(m.sha256.is_some());
                m.id.clone().unwrap()
            }
            other => panic!("{other:?}"),
        }
    };
    let info = e
        .client
        .get_media_for(&media_id, TOKEN, Some(PNID))
        .await
        .unwrap();
    let bytes = e.client.download_media(&info.url, TOKEN).await.unwrap();
    assert_eq!(&bytes[..], b"\x89PNG\r\n\x1a\n");
    e.sim.shutdown().await;
}

#[tokio::test]
async fn inbound_every_type_parses() {
    let e = env().await;
    let items = [
        json!({"type": "text", "text": {"body": "hi"}}),
        json!({"type": "image", "image": {}}),
        json!({"type": "audio", "audio": {"voice": true}}),
        json!({"type": "video", "video": {}}),
        json!({"type": "document", "document": {"filename": "x.pdf"}}),
        json!({"type": "sticker", "sticker": {"animated": false}}),
        json!({"type": "location", "location": {"latitude": "1.5", "longitude": "2.5"}}),
        json!({"type": "contacts", "contacts": [{"name": {"formatted_name": "A"}}]}),
        json!({"type": "interactive", "interactive": {"type": "button_reply", "button_reply": {"id": "y", "title": "Yes"}}}),
        json!({"type": "interactive", "interactive": {"type": "list_reply", "list_reply": {"id": "r", "title": "Row"}}}),
        json!({"type": "interactive", "interactive": {"type": "nfm_reply", "nfm_reply": {"name": "flow", "response_json": "{}"}}}),
        json!({"type": "button", "button": {"text": "Stop", "payload": "STOP"}, "context": {"from": "15550783881", "id": "wamid.T"}}),
        json!({"type": "reaction", "reaction": {"message_id": "wamid.T", "emoji": "❤"}}),
        json!({"type": "order", "order": {"catalog_id": "c", "product_items": []}}),
        json!({"type": "system", "system": {"body": "changed", "type": "customer_changed_number", "new_wa_id": "1555"}}),
        json!({"type": "unsupported"}),
    ];
    let n = items.len();
    for mut it in items {
        it["phone_number_id"] = json!(PNID);
        it["from"] = json!(CUSTOMER);
        e.sim.inject_inbound(it).unwrap();
    }
    e.rx.wait_until("all inbound", |ns| {
        ns.iter()
            .map(|x| {
                x.messages_values()
                    .map(|(_, v)| v.messages.len())
                    .sum::<usize>()
            })
            .sum::<usize>()
            == n
    })
    .await;
    let bodies = e.rx.bodies.lock().unwrap().clone();
    let msgs: Vec<_> = bodies
        .iter()
        .flat_map(|x| {
            x.messages_values()
                .flat_map(|(_, v)| v.messages.clone())
                .collect::<Vec<_>>()
        })
        .collect();
    let unknown: Vec<_> = msgs
        .iter()
        .filter(|m| matches!(m.content, InboundContent::Unknown { .. }))
        .collect();
    assert!(unknown.is_empty(), "{unknown:?}");
    let unsupported = msgs.iter().find(|m| m.type_name == "unsupported").unwrap();
    assert_eq!(unsupported.errors[0].code, Some(131051));
    assert!(
        msgs.iter()
            .all(|m| m.id.starts_with("wamid.") && m.timestamp.is_some())
    );
    assert!(bodies.iter().all(|b| {
        b.entries
            .iter()
            .all(|en| en.changes.iter().all(|c| matches!(c, Change::Messages(_))))
    }));
    e.sim.shutdown().await;
}
