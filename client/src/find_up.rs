//! Client-side find-up over plain `GetMetadata` calls: probes are generated lazily, up to `window` of
//! them are in flight at once, and results are consumed strictly in probe order, so the nearest root
//! always wins and the counters equal the server-side `FindUp` RPC's. The first hit ends the search and
//! drops (cancels) the speculative probes still in flight.

use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use outpost_proto::find_up::{
    Decision, FindUpFailure, FindUpSearch, FindUpSpec, Probe, ProbeOutcome,
};
use outpost_proto::pb;

use crate::error::ClientError;
use crate::executor::Executor;

/// Default number of probes in flight.
pub const DEFAULT_WINDOW: usize = 8;

/// Runs the find-up described by `request` with `window` probes in flight (1 = sequential).
///
/// # Errors
/// [`ClientError::InvalidFindUp`] for a malformed request (checked locally, before any call), the
/// first probe error in order under the propagate policy, and transport failures (never ignored, since
/// they say nothing about the probed path).
pub async fn find_up(
    executor: &Executor,
    request: pb::FindUpRequest,
    window: usize,
) -> Result<pb::FindUpResponse, ClientError> {
    let profile = request.profile.clone();
    let mut search = FindUpSearch::new(FindUpSpec::try_from(request)?);
    let window = window.max(1);
    let mut in_flight = FuturesOrdered::new();
    loop {
        while in_flight.len() < window {
            let Some(probe) = search.next_probe() else {
                break;
            };
            in_flight.push_back(run_probe(executor, probe, profile.clone()));
        }
        let Some((probe, outcome)) = in_flight.next().await else {
            // Every probe was consumed without a decision: the fold always decides on the last probe.
            return Err(ClientError::Server(tonic::Status::internal(
                "find-up ran out of probes without a decision",
            )));
        };
        let outcome = match outcome {
            Err(transport) => return Err(transport),
            Ok(outcome) => outcome,
        };
        match search.consume(&probe, outcome) {
            Decision::Continue => {}
            Decision::Done(result) => return Ok(result.into()),
            Decision::Failed(FindUpFailure::Probe { error, .. }) => return Err(error),
            Decision::Failed(other) => {
                return Err(ClientError::Server(tonic::Status::internal(
                    other.to_string(),
                )));
            }
        }
    }
}

type Outcome = Result<ProbeOutcome<ClientError>, ClientError>;

/// One probe: `GetMetadata` following symlinks, like `stat`. `NOT_FOUND` means absent; other answers
/// from the executor are probe errors for the policy to judge; transport failures end the search.
async fn run_probe(executor: &Executor, probe: Probe, profile: String) -> (Probe, Outcome) {
    let request = pb::GetMetadataRequest {
        path: probe.path().to_owned(),
        follow_symlinks: true,
        profile,
    };
    let result = executor.fs_client().get_metadata(request).await;
    let outcome = match result.map_err(ClientError::from) {
        Ok(meta) => Ok(ProbeOutcome::Found(meta.into_inner().kind().into())),
        Err(ClientError::Server(status)) if status.code() == tonic::Code::NotFound => {
            Ok(ProbeOutcome::NotFound)
        }
        Err(err @ ClientError::Server(_)) => Ok(ProbeOutcome::Error(err)),
        Err(transport) => Err(transport),
    };
    (probe, outcome)
}
