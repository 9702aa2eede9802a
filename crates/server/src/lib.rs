//! The `tern` binary's wiring: configuration, start-up, the operator CLI and the demo.
//! Only this crate knows every concrete part; the layers below stay independent.

pub mod admin;
pub mod alloc;
pub mod app;
pub mod client;
pub mod config;
pub mod connections;
pub mod demo;
pub mod listen;
pub mod telemetry;
pub mod test_network;
pub mod trigger;
