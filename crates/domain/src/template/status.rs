//! A template's state in Tern, and its category (the plan's priced categories).

use crate::names::name_enum;
pub use crate::plan::Category;

name_enum!(
    /// Where a template stands: a `draft` in Tern, then as the network reviews it.
    TemplateStatus {
        Draft = "draft",
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
        Paused = "paused",
        Disabled = "disabled",
    }
);

impl TemplateStatus {
    /// Only a draft or a rejected template goes (again) to the network for review.
    pub fn can_submit(self) -> bool {
        matches!(self, TemplateStatus::Draft | TemplateStatus::Rejected)
    }
}
