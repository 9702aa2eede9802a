//! Business phone numbers: whether one can send.

use crate::names::name_enum;

name_enum!(
    /// A business number's state in Tern.
    NumberStatus { Connected = "connected", Disconnected = "disconnected" }
);

impl NumberStatus {
    /// Only a connected number sends (the API refuses a send from another, the dispatcher
    /// fails what is queued on it).
    pub fn can_send(self) -> bool {
        self == NumberStatus::Connected
    }
}
