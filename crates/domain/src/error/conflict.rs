//! The `details.reason` of every `409 conflict`: one list, so the `conflict` docs page and
//! the answers cannot disagree.

use crate::names::name_enum;

name_enum!(
    /// Why a valid request conflicts with the current state (`details.reason`).
    ConflictReason {
        AlreadyExists = "already_exists",
        AlreadyRevoked = "already_revoked",
        Revoked = "revoked",
        AudienceEmpty = "audience_empty",
        InvalidCampaignState = "invalid_campaign_state",
        NetworkRejected = "network_rejected",
        NoConnectedPhoneNumber = "no_connected_phone_number",
        NoPhoneNumber = "no_phone_number",
        PhoneNumberNotConnected = "phone_number_not_connected",
        PhoneNumberRequired = "phone_number_required",
        TemplateExists = "template_exists",
        TemplateNotDraft = "template_not_draft",
        LastOwner = "last_owner",
        NotInbound = "not_inbound",
        TooOld = "too_old",
        ContactBlocked = "contact_blocked",
        BlockNeedsRecentMessage = "block_needs_recent_message",
    }
);

impl ConflictReason {
    /// What the reason means and what to do, for the docs.
    pub fn description(self) -> &'static str {
        use ConflictReason::*;
        match self {
            AlreadyExists => {
                "An item with the same unique value (a name, a key, a number) already exists; details.constraint may name it."
            }
            AlreadyRevoked => "The API key is already revoked.",
            Revoked => "The API key is revoked and cannot be rotated; create a new key.",
            AudienceEmpty => "The campaign's audience matches no contact.",
            InvalidCampaignState => {
                "The campaign's status does not allow this action (details.status and details.action name them)."
            }
            NetworkRejected => {
                "The network refused the request (a template, a read mark, a block; details.network_code and details.network_message say why)."
            }
            NoConnectedPhoneNumber => {
                "The organisation has no connected business number to send from or submit with."
            }
            NoPhoneNumber => {
                "The organisation has no business number: a template belongs to the business account of a number."
            }
            PhoneNumberNotConnected => "The business number named in `from` is not connected.",
            PhoneNumberRequired => {
                "This message needs the customer's phone number (for example an authentication template), and the contact has only a user id."
            }
            TemplateExists => {
                "A template with this name and language already exists in the business account."
            }
            LastOwner => {
                "The organisation's last owner can be neither removed nor demoted; make another member owner first."
            }
            NotInbound => {
                "Only a customer's (inbound) message can be marked read; this one was sent by the business."
            }
            TooOld => "The network marks a message read only within 30 days of its receipt.",
            ContactBlocked => {
                "The organisation blocked this customer (the Contact's blocked_at); unblock them with DELETE /contacts/{contact_id}/block first."
            }
            BlockNeedsRecentMessage => {
                "The network blocks only customers who wrote to one of the organisation's numbers in the last 24 hours."
            }
            TemplateNotDraft => {
                "Only a draft or rejected template can be submitted (details.status names its status)."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_described() {
        for r in ConflictReason::ALL {
            assert!(!r.description().is_empty(), "{}", r.as_str());
            assert_eq!(ConflictReason::parse(r.as_str()), Some(*r));
        }
    }
}
