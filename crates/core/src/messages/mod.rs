//! Messages: accepting one ([`send`]), its status ([`status`], the only writer), and why it
//! failed ([`failure`]).

pub mod failure;
pub mod send;
pub mod status;
