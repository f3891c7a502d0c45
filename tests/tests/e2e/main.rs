//! End-to-end tests: real executors on real sockets (and real `outpost` processes), driven through
//! the client library and the CLI. One test binary with submodules keeps link time down.

mod cli;
mod find_up;
mod fs;
mod fs_profiles;
mod http;
mod process;
mod process_faults;
mod registry;
mod registry_fleet;
mod ssh;
mod transports;

use std::time::Duration;

use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

/// Polls the overall health status until it is `want` (bounded; the executor flips it within ms).
pub(crate) async fn wait_health(
    channel: tonic::transport::Channel,
    want: ServingStatus,
) -> anyhow::Result<()> {
    let mut client = HealthClient::new(channel);
    for _ in 0..200 {
        let status = client
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await?
            .into_inner()
            .status();
        if status == want {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("health never became {want:?}")
}
