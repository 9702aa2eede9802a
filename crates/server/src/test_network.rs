//! The built-in test network (APP.md §5): the network simulator, in-process on loopback,
//! answering every test space's number. Its webhooks come back over HTTP to this process's
//! `/webhooks/whatsapp/test`, signed with a secret derived from the master key (the same in
//! every process sharing the database, never shown), so the send path, the dispatcher, the
//! status webhooks and the inbox are the real ones.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result, anyhow};
use serde_json::Value;
use tern_cloudapi::CloudApiClient;
use tern_core::test_space::{TestNetwork, TestNumber};
use tern_domain::crypto::{MasterKey, Purpose};

/// The simulator as the test spaces' network.
pub struct SimNetwork {
    sim: tern_simulator::SimHandle,
    client: CloudApiClient,
    secret: String,
    /// Numbers registered with the simulator by this process.
    known: Mutex<HashSet<String>>,
}

impl SimNetwork {
    /// Starts the simulator on a free loopback port; its webhooks go nowhere until
    /// [`SimNetwork::call_back`].
    pub async fn start(key: &MasterKey, graph_version: &str) -> Result<Arc<SimNetwork>> {
        let secret = secret(key);
        // Magic recipients on; templates reviewed about 2 s after they are submitted.
        let mut args = tern_simulator::SimArgs::test_space(secret.clone());
        // Slow enough to watch a message move in the app, quick enough for a test.
        args.sent_delay_ms = 300;
        args.delivered_delay_ms = 800;
        args.read_delay_ms = 1500;
        let sim = tern_simulator::start(args)
            .await
            .map_err(|e| anyhow!("cannot start the test network: {e}"))?;
        let client = CloudApiClient::new(tern_cloudapi::ClientConfig {
            base_url: sim.base_url(),
            version: graph_version.to_string(),
            ..Default::default()
        })
        .context("cannot build the test network's client")?;
        Ok(Arc::new(SimNetwork {
            sim,
            client,
            secret,
            known: Mutex::default(),
        }))
    }

    /// Sends the network's webhooks to the server listening on `addr` (over loopback).
    pub fn call_back(&self, addr: SocketAddr) {
        let ip = match addr.ip() {
            IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let url = format!(
            "http://{}/webhooks/whatsapp/test",
            SocketAddr::new(ip, addr.port())
        );
        self.sim.set_callback_url(Some(url));
    }

    /// The secret its webhooks are signed with (`NetworkWebhook::test_secret`).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The simulator itself (tests read its request log).
    pub fn simulator(&self) -> &tern_simulator::SimHandle {
        &self.sim
    }
}

/// The test network's app secret: derived from the master key, so every process agrees.
fn secret(key: &MasterKey) -> String {
    key.derive(Purpose::TestNetworkSecret)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl TestNetwork for SimNetwork {
    fn client(&self) -> &CloudApiClient {
        &self.client
    }

    fn register_number(&self, number: &TestNumber<'_>) -> std::result::Result<(), String> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if known.contains(number.phone_number_id) {
            return Ok(());
        }
        self.sim
            .register_number(tern_simulator::NumberSpec {
                id: number.phone_number_id.to_string(),
                display_phone_number: number.display_phone_number.to_string(),
                waba_id: number.waba_id.to_string(),
                access_token: number.access_token.to_string(),
                throughput_mps: None,
                verified_name: Some("Tern test number".into()),
            })
            .map_err(|e| e.to_string())?;
        known.insert(number.phone_number_id.to_string());
        Ok(())
    }

    fn inject_inbound(
        &self,
        phone_number_id: &str,
        body: &Value,
    ) -> std::result::Result<String, String> {
        self.sim
            .inject_inbound_to(phone_number_id, body.clone())
            .map_err(|e| e.to_string())
    }
}
