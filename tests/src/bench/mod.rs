//! The benchmark behind `outpost-bench`: each section measures outpost side by side with a baseline in
//! the same run (machines here are noisy, so only ratios and same-run comparisons are meaningful) and
//! checks the targets.
//!
//! # Layout
//! - [`sandbox`]: `outpost sandbox` launch overhead vs a plain spawn and bwrap.
//! - [`report`]: rows, the markdown table, JSON output and README regeneration.
//! - [`fs`]: GetMetadata round trips and find-up under simulated latency.
//! - [`http`]: HTTP proxy latency, SSE event latency and download throughput vs direct reqwest.
//! - [`process`]: exec round trips, output throughput, many concurrent processes, executor RSS.
//! - [`registry`]: environment readiness, snapshot cost, waiter wake-up, a 64-executor fleet.

pub mod fs;
pub mod http;
pub mod process;
pub mod registry;
pub mod report;
pub mod sandbox;

use std::time::Duration;

/// Percentile (0..=100) of unsorted samples, by nearest rank.
pub fn percentile(samples: &mut [Duration], pct: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let rank = ((pct / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// Milliseconds as f64.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut s: Vec<_> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&mut s, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&mut s, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&mut [], 50.0), Duration::ZERO);
    }
}
