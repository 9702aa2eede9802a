//! The statements that change a message's status, reachable only through one handle
//! (`Db::status_writes`, `Tx::status_writes`): the status writer
//! (`tern_core::messages::status`) is their one caller outside the store, and a test there
//! checks that no other source file asks for the handle.

use uuid::Uuid;

use tern_domain::failure::Failure;
use tern_domain::message::Status;

use crate::db::{Db, Tx};
use crate::error::Result;
use crate::{
    DispatchClaim, DispatchCompletion, DispatchItem, DispatchLease, DispatchWrite, ExpiredDispatch,
    Message, StatusChange,
};

/// The status-changing statements of the pool.
pub struct StatusWrites<'a>(&'a Db);

/// The status-changing statements of an open transaction.
pub struct TxStatusWrites<'a>(&'a mut Tx);

impl Db {
    /// The status-changing statements (for the status writer only).
    pub fn status_writes(&self) -> StatusWrites<'_> {
        StatusWrites(self)
    }
}

impl Tx {
    /// The status-changing statements in this transaction (for the status writer only).
    pub fn status_writes(&mut self) -> TxStatusWrites<'_> {
        TxStatusWrites(self)
    }
}

impl StatusWrites<'_> {
    pub async fn claim_dispatch(&self, claim: &DispatchClaim<'_>) -> Result<Vec<DispatchItem>> {
        self.0.claim_dispatch(claim).await
    }

    pub async fn complete_dispatch(
        &self,
        id: Uuid,
        lease: &DispatchLease,
        expected_status: Status,
        expected_updated_at: i64,
        change: &StatusChange,
        at: i64,
    ) -> Result<DispatchWrite> {
        self.0
            .complete_dispatch(id, lease, expected_status, expected_updated_at, change, at)
            .await
    }

    pub async fn refund_message_debit(&self, id: Uuid, at: i64) -> Result<i64> {
        self.0.refund_message_debit(id, at).await
    }

    pub async fn update_message_status(
        &self,
        id: Uuid,
        expected_status: Status,
        expected_updated_at: i64,
        change: &StatusChange,
        at: i64,
    ) -> Result<bool> {
        self.0
            .update_message_status(id, expected_status, expected_updated_at, change, at)
            .await
    }
}

impl TxStatusWrites<'_> {
    pub async fn complete_dispatch(
        &mut self,
        id: Uuid,
        lease: &DispatchLease,
        expected_status: Status,
        expected_updated_at: i64,
        change: &StatusChange,
        at: i64,
    ) -> Result<DispatchWrite> {
        self.0
            .complete_dispatch(id, lease, expected_status, expected_updated_at, change, at)
            .await
    }

    pub async fn complete_dispatches(
        &mut self,
        items: &[DispatchCompletion<'_>],
        at: i64,
    ) -> Result<Vec<DispatchWrite>> {
        self.0.complete_dispatches(items, at).await
    }

    pub async fn refund_message_debit(&mut self, id: Uuid, at: i64) -> Result<i64> {
        self.0.refund_message_debit(id, at).await
    }

    pub async fn expire_dispatch(
        &mut self,
        now: i64,
        failure_code: &str,
        failure: &Failure,
        limit: i64,
    ) -> Result<Vec<ExpiredDispatch>> {
        self.0
            .expire_dispatch(now, failure_code, failure, limit)
            .await
    }

    pub async fn update_message_status(
        &mut self,
        id: Uuid,
        expected_status: Status,
        expected_updated_at: i64,
        change: &StatusChange,
        at: i64,
    ) -> Result<bool> {
        self.0
            .update_message_status(id, expected_status, expected_updated_at, change, at)
            .await
    }

    /// [`TxStatusWrites::update_message_status`] of many messages in one statement.
    pub async fn update_message_statuses(
        &mut self,
        items: &[crate::StatusWrite<'_>],
        at: i64,
    ) -> Result<Vec<bool>> {
        self.0.update_message_statuses(items, at).await
    }

    pub async fn fail_queued_campaign_messages(
        &mut self,
        campaign_id: Uuid,
        phone_number_id: &str,
        failure: &Failure,
        now: i64,
        limit: i64,
    ) -> Result<Vec<Message>> {
        self.0
            .fail_queued_campaign_messages(campaign_id, phone_number_id, failure, now, limit)
            .await
    }
}
