//! Plan count limits, checked atomically with the create they guard: the count is taken in
//! the create's transaction under the organisation's row lock (`Tx::count_locked`), so two
//! concurrent creates at `limit - 1` cannot both pass. Campaigns will use the same check.

use tern_domain::Problem;
use tern_domain::plan::{Effective, Entitlement};
use tern_store::{Counted, Tx};

fn counted(e: Entitlement) -> Option<Counted> {
    match e {
        Entitlement::Contacts => Some(Counted::Contacts),
        Entitlement::Templates => Some(Counted::Templates),
        Entitlement::PhoneNumbers => Some(Counted::PhoneNumbers),
        Entitlement::ApiKeys => Some(Counted::ActiveApiKeys),
        Entitlement::WebhookSubscriptions => Some(Counted::WebhookSubscriptions),
        // Not stored yet: nothing to count.
        Entitlement::Campaigns => None,
    }
}

/// Refuses one more `e` (`plan_limit_reached`) when the organisation's rows already reach
/// the plan's limit. Call inside the transaction that then inserts the row.
pub async fn check_one_more(
    tx: &mut Tx,
    org_id: uuid::Uuid,
    effective: &Effective<'_>,
    e: Entitlement,
) -> Result<(), Problem> {
    if effective.limit(e).is_none() {
        return Ok(());
    }
    let Some(what) = counted(e) else {
        return Ok(());
    };
    let used = tx.count_locked(org_id, what).await?;
    effective.check_count(e, used)
}
