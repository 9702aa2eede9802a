//! The network's template words (statuses, events, categories, rejection reasons) and what
//! they mean in Tern.

use crate::notification::{TemplateCategoryUpdate, TemplateEvent};
use tern_domain::template::{Category, TemplateStatus};

/// Tern's status for a status of the network's template API (`APPROVED`, …); `None` for
/// values that do not say whether the template can be sent (e.g. `LIMIT_EXCEEDED`).
pub fn template_status(s: &str) -> Option<TemplateStatus> {
    Some(match s.to_ascii_uppercase().as_str() {
        "APPROVED" | "REINSTATED" | "UNARCHIVED" => TemplateStatus::Approved,
        "PENDING" | "IN_APPEAL" => TemplateStatus::Pending,
        "REJECTED" => TemplateStatus::Rejected,
        "PAUSED" => TemplateStatus::Paused,
        "DISABLED" | "DELETED" | "PENDING_DELETION" | "ARCHIVED" | "LOCKED" => {
            TemplateStatus::Disabled
        }
        _ => return None,
    })
}

/// `marketing` for `MARKETING`, …; `None` for a category Tern does not price.
pub fn template_category(s: &str) -> Option<Category> {
    Category::parse(&s.to_ascii_lowercase())
}

/// The network's spelling of a category (`MARKETING`).
pub fn category_word(c: Category) -> String {
    c.as_str().to_ascii_uppercase()
}

/// A rejection reason as reported by the network, without its "no reason" values.
pub fn rejection_reason(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|r| !r.is_empty() && !r.eq_ignore_ascii_case("NONE"))
        .map(str::to_string)
}

impl TemplateEvent {
    /// Tern's status after this event; `None` for events that do not change whether the
    /// template can be sent (quality flags, limits).
    pub fn status(&self) -> Option<TemplateStatus> {
        match self {
            TemplateEvent::Approved | TemplateEvent::Reinstated | TemplateEvent::Unarchived => {
                Some(TemplateStatus::Approved)
            }
            TemplateEvent::Rejected => Some(TemplateStatus::Rejected),
            TemplateEvent::Pending | TemplateEvent::InAppeal => Some(TemplateStatus::Pending),
            TemplateEvent::Paused => Some(TemplateStatus::Paused),
            TemplateEvent::Disabled
            | TemplateEvent::Deleted
            | TemplateEvent::PendingDeletion
            | TemplateEvent::Archived
            | TemplateEvent::Locked => Some(TemplateStatus::Disabled),
            TemplateEvent::Flagged | TemplateEvent::LimitExceeded | TemplateEvent::Unknown(_) => {
                None
            }
        }
    }
}

impl TemplateCategoryUpdate {
    /// Tern's category now in force: `new_category` (when the update only announces a later
    /// change through `correct_category`, `new_category` is still the current one). `None`
    /// when missing or a word Tern does not know.
    pub fn category(&self) -> Option<Category> {
        self.new_category.as_deref().and_then(template_category)
    }

    /// Tern's category the network announces for later (`correct_category`), if any.
    pub fn announced_category(&self) -> Option<Category> {
        self.correct_category.as_deref().and_then(template_category)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TemplateStatus as S;

    #[test]
    fn network_names() {
        assert_eq!(template_status("APPROVED"), Some(S::Approved));
        assert_eq!(template_status("in_appeal"), Some(S::Pending));
        assert_eq!(template_status("REJECTED"), Some(S::Rejected));
        assert_eq!(template_status("PAUSED"), Some(S::Paused));
        assert_eq!(template_status("DISABLED"), Some(S::Disabled));
        assert_eq!(template_status("PENDING_DELETION"), Some(S::Disabled));
        assert_eq!(template_status("LIMIT_EXCEEDED"), None);
        assert_eq!(template_category("MARKETING"), Some(Category::Marketing));
        assert_eq!(template_category("SERVICE"), None);
        assert_eq!(category_word(Category::Utility), "UTILITY");
        assert_eq!(rejection_reason(Some("NONE")), None);
        assert_eq!(rejection_reason(Some("")), None);
        assert_eq!(
            rejection_reason(Some("INVALID_FORMAT")).as_deref(),
            Some("INVALID_FORMAT")
        );
        assert_eq!(
            TemplateEvent::parse("REINSTATED").status(),
            Some(S::Approved)
        );
        assert_eq!(TemplateEvent::parse("FLAGGED").status(), None);
    }

    #[test]
    fn category_update_words() {
        let u = |new: Option<&str>, correct: Option<&str>| TemplateCategoryUpdate {
            message_template_id: None,
            name: None,
            language: None,
            previous_category: None,
            new_category: new.map(str::to_owned),
            correct_category: correct.map(str::to_owned),
            raw: serde_json::Value::Null,
        };
        assert_eq!(
            u(Some("MARKETING"), None).category(),
            Some(Category::Marketing)
        );
        // Announced for later: the category in force is still `new_category`.
        let announced = u(Some("UTILITY"), Some("MARKETING"));
        assert_eq!(announced.category(), Some(Category::Utility));
        assert_eq!(announced.announced_category(), Some(Category::Marketing));
        assert_eq!(
            u(Some("authentication"), None).category(),
            Some(Category::Authentication)
        );
        assert_eq!(u(Some("MARKETING_LITE"), None).category(), None);
        assert_eq!(u(None, Some("UTILITY")).category(), None);
    }
}
