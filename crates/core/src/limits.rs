//! Plan count limits, checked atomically with the create they guard: the count is taken in
//! the create's transaction under the organisation's row lock (`Tx::count_locked`), so two
//! concurrent creates at `limit - 1` cannot both pass.

use tern_domain::Problem;
use tern_domain::plan::{Effective, Entitlement};
use tern_store::{Counted, Tx};

fn counted(e: Entitlement) -> Counted {
    match e {
        Entitlement::Contacts => Counted::Contacts,
        Entitlement::Templates => Counted::Templates,
        Entitlement::PhoneNumbers => Counted::PhoneNumbers,
        Entitlement::ApiKeys => Counted::ActiveApiKeys,
        Entitlement::WebhookSubscriptions => Counted::WebhookSubscriptions,
        Entitlement::Campaigns => Counted::Campaigns,
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
    let used = tx.count_locked(org_id, counted(e)).await?;
    effective.check_count(e, used)
}
