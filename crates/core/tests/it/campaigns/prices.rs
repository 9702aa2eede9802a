//! A campaign's price before sending: the estimate made at resolve (and launch), and the
//! wallet checked against it at launch and against the recipients left at resume
//! (APP.md §6, §7 "Agents"). Template `hello` is a utility template; these worlds price
//! utility messages at 100 unless billing is off.

use super::*;

const PRICE: i64 = 100;

async fn priced(db: &Db) -> World {
    world_with(db, json!({"prices_minor": {"utility": PRICE}})).await
}

impl World {
    /// Moves the wallet by `delta` and takes the organisation as it is now (a request reads
    /// its organisation afresh).
    async fn wallet(&mut self, delta: i64) {
        self.db
            .adjust_wallet(self.org.id, delta, "top_up", None, now_ms())
            .await
            .unwrap();
        self.org = self.db.get_org(self.org.id).await.unwrap().unwrap();
        self.p = fixtures::principal(&self.org);
    }

    /// `n` VIP contacts with a name and a city.
    async fn vips(&self, n: usize) -> Vec<Uuid> {
        let mut ids = Vec::new();
        for i in 0..n {
            ids.push(
                self.contact(
                    &format!("1415555{:04}", 301 + i),
                    Some("Ada"),
                    Some("Leeds"),
                    &["vip"],
                )
                .await,
            );
        }
        ids
    }
}

fn wallet_low(p: &Problem, required: i64, balance: i64) {
    assert_eq!(p.code, ErrorCode::WalletBalanceLow, "{p:?}");
    assert_eq!(p.details["required_minor"], json!(required), "{p:?}");
    assert_eq!(p.details["balance_minor"], json!(balance), "{p:?}");
    assert_eq!(p.details["wallet_category"], json!("utility"), "{p:?}");
}

async fn resolve_estimates_the_recipients_not_skipped_at_the_category_price(db: Db) {
    let w = priced(&db).await;
    let ids = w.vips(3).await;
    // Skipped: opted out, and no city for a variable without a fallback.
    w.opt_out(ids[0]).await;
    w.contact("14155559999", Some("Bo"), None, &["vip"]).await;
    let id = w.draft().await;
    assert_eq!(
        w.get(id).await.estimated_cost_minor,
        None,
        "not before resolve"
    );
    let c = w.act(id, Action::Resolve, json!({})).await.unwrap();
    assert_eq!(c.recipient_count, Some(4));
    assert_eq!(c.estimated_cost_minor, Some(2 * PRICE));
    let shown = campaigns::show(&w.core, &c).await.unwrap();
    assert_eq!(shown.estimated_cost_minor, Some(2 * PRICE));
}

async fn billing_off_estimates_zero_and_launches_with_an_empty_wallet(db: Db) {
    let w = world(&db).await;
    assert_eq!(w.org.wallet_balance_minor, 0);
    w.vips(2).await;
    let id = w.draft().await;
    let c = w.act(id, Action::Resolve, json!({})).await.unwrap();
    assert_eq!(c.estimated_cost_minor, Some(0));
    let c = w.act(id, Action::Launch, json!({})).await.unwrap();
    assert_eq!(
        (c.status, c.estimated_cost_minor),
        (Status::Running, Some(0))
    );
}

async fn launch_refuses_what_the_wallet_cannot_cover_and_leaves_the_campaign_ready(db: Db) {
    let mut w = priced(&db).await;
    w.wallet(150).await;
    w.vips(2).await;
    // From a draft: resolved by the launch, then refused; it stays resolved and `ready`.
    let id = w.draft().await;
    let p = w.act(id, Action::Launch, json!({})).await.unwrap_err();
    wallet_low(&p, 2 * PRICE, 150);
    let c = w.get(id).await;
    assert_eq!((c.status, c.recipient_count), (Status::Ready, Some(2)));
    assert!(c.resolved_at.is_some() && c.launched_at.is_none());
    assert_eq!(c.estimated_cost_minor, Some(2 * PRICE));
    // Nothing was queued: a step of a ready campaign sends nothing.
    assert_eq!(w.step(id, now_ms()).await.accepted, 0);
    // Enough in the wallet: it launches and sends to both.
    w.wallet(50).await;
    let c = w.act(id, Action::Launch, json!({})).await.unwrap();
    assert_eq!(c.status, Status::Running);
    assert_eq!(w.step(id, now_ms()).await.accepted, 2);
}

async fn resume_checks_the_wallet_against_the_recipients_left(db: Db) {
    let mut w = priced(&db).await;
    w.wallet(3 * PRICE).await;
    w.vips(3).await;
    let id = w.draft().await;
    w.act(id, Action::Launch, json!({})).await.unwrap();
    // Spent elsewhere before the fan-out: one message is paid, then it pauses.
    w.wallet(-2 * PRICE).await;
    let step = w.step(id, now_ms()).await;
    assert_eq!((step.accepted, step.status), (1, Some(Status::Paused)));
    assert_eq!(
        w.get(id).await.pause_reason,
        Some(PauseReason::WalletBalanceLow)
    );
    // Two recipients left: 200 needed, not the 300 of the whole campaign.
    w.wallet(PRICE).await;
    let p = w.act(id, Action::Resume, json!({})).await.unwrap_err();
    wallet_low(&p, 2 * PRICE, PRICE);
    assert_eq!(w.get(id).await.status, Status::Paused);
    w.wallet(PRICE).await;
    let c = w.act(id, Action::Resume, json!({})).await.unwrap();
    assert_eq!(c.status, Status::Running);
    assert_eq!(w.step(id, now_ms()).await.accepted, 2);
}

async fn a_resume_with_nobody_left_to_message_needs_no_wallet(db: Db) {
    let mut w = priced(&db).await;
    w.wallet(2 * PRICE).await;
    w.vips(2).await;
    let id = w.draft().await;
    w.act(id, Action::Launch, json!({})).await.unwrap();
    assert_eq!(w.step(id, now_ms()).await.accepted, 2);
    w.act(id, Action::Pause, json!({})).await.unwrap();
    // The wallet is empty, but the queued messages were paid for at acceptance.
    w.wallet(0).await;
    assert_eq!(w.org.wallet_balance_minor, 0);
    let c = w.act(id, Action::Resume, json!({})).await.unwrap();
    assert_eq!(c.status, Status::Running);
}

async fn a_scheduled_launch_the_wallet_cannot_cover_pauses(db: Db) {
    let mut w = priced(&db).await;
    w.wallet(PRICE).await;
    w.vips(2).await;
    let id = w.draft().await;
    let at = now_ms() + HOUR;
    w.act(id, Action::Schedule, json!({"scheduled_at": format_ms(at)}))
        .await
        .unwrap();
    let due = w.step(id, at).await;
    assert_eq!((due.accepted, due.status), (0, Some(Status::Paused)));
    let c = w.get(id).await;
    assert_eq!(c.pause_reason, Some(PauseReason::WalletBalanceLow));
    assert_eq!(
        (c.recipient_count, c.estimated_cost_minor),
        (Some(2), Some(2 * PRICE))
    );
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    resolve_estimates_the_recipients_not_skipped_at_the_category_price,
    billing_off_estimates_zero_and_launches_with_an_empty_wallet,
    launch_refuses_what_the_wallet_cannot_cover_and_leaves_the_campaign_ready,
    resume_checks_the_wallet_against_the_recipients_left,
    a_resume_with_nobody_left_to_message_needs_no_wallet,
    a_scheduled_launch_the_wallet_cannot_cover_pauses,
}
