//! Client-side token buckets that follow EC2's documented API rate limits (reference
//! A.9), so a large apply paces itself instead of tripping `RequestLimitExceeded`.
//!
//! EC2 meters each account and region with one bucket per API family (request tokens)
//! and, for launches and terminations, a second bucket counted in instances (resource
//! tokens). gpuplan keeps the same buckets per region, starting full, and waits for a
//! token before each call. They only see this process's calls: other tools using the
//! same account still share EC2's real buckets, which is why throttling errors remain
//! `Throttled` and are retried by the executor.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One documented bucket: capacity and refill per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    pub capacity: f64,
    pub refill_per_sec: f64,
}

const fn limit(capacity: u32, refill: u32) -> Limit {
    Limit { capacity: capacity as f64, refill_per_sec: refill as f64 }
}

/// The buckets gpuplan draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// Describe*/Get* calls with a filter or pagination: 100, 20/s.
    NonMutating,
    /// Other mutating calls (CreateFleet, CreateLaunchTemplate): 50, 5/s. CreateFleet is
    /// not in EC2's table of own buckets, so it falls under this category.
    Mutating,
    /// CreateLaunchTemplateVersion / ModifyLaunchTemplate: 100, 5/s.
    LaunchTemplateVersion,
    /// RunInstances requests: 5, 2/s.
    RunInstances,
    /// RunInstances instances (resource tokens): 1,000, 2/s.
    RunInstancesResource,
    /// TerminateInstances requests: 100, 5/s.
    TerminateInstances,
    /// TerminateInstances instances (resource tokens): 1,000, 20/s.
    TerminateInstancesResource,
    /// CreateTags: 100, 10/s.
    CreateTags,
}

impl Bucket {
    pub fn limit(self) -> Limit {
        match self {
            Bucket::NonMutating => limit(100, 20),
            Bucket::Mutating => limit(50, 5),
            Bucket::LaunchTemplateVersion => limit(100, 5),
            Bucket::RunInstances => limit(5, 2),
            Bucket::RunInstancesResource => limit(1_000, 2),
            Bucket::TerminateInstances => limit(100, 5),
            Bucket::TerminateInstancesResource => limit(1_000, 20),
            Bucket::CreateTags => limit(100, 10),
        }
    }
}

#[derive(Debug)]
struct State {
    tokens: f64,
    at: Instant,
}

/// Token buckets per (region, bucket).
#[derive(Debug, Default)]
pub struct Throttle {
    buckets: Mutex<HashMap<(String, Bucket), State>>,
}

impl Throttle {
    /// Wait until `n` tokens (at most the bucket's capacity) are available, then take them.
    pub async fn acquire(&self, region: &str, bucket: Bucket, n: u32) {
        loop {
            match self.try_take(region, bucket, n, Instant::now()) {
                None => return,
                Some(wait) => tokio::time::sleep(wait).await,
            }
        }
    }

    /// Take the tokens now, or say how long to wait before trying again.
    fn try_take(&self, region: &str, bucket: Bucket, n: u32, now: Instant) -> Option<Duration> {
        let Limit { capacity, refill_per_sec } = bucket.limit();
        let need = f64::from(n.max(1)).min(capacity);
        let mut map = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let st = map.entry((region.to_string(), bucket)).or_insert(State { tokens: capacity, at: now });
        let elapsed = now.saturating_duration_since(st.at).as_secs_f64();
        st.tokens = (st.tokens + elapsed * refill_per_sec).min(capacity);
        st.at = now;
        if st.tokens >= need {
            st.tokens -= need;
            None
        } else {
            Some(Duration::from_secs_f64((need - st.tokens) / refill_per_sec).max(Duration::from_millis(1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_to_capacity_then_refills_at_the_documented_rate() {
        let t = Throttle::default();
        let t0 = Instant::now();
        for _ in 0..5 {
            assert_eq!(t.try_take("us-east-1", Bucket::RunInstances, 1, t0), None);
        }
        let wait = t.try_take("us-east-1", Bucket::RunInstances, 1, t0).expect("bucket is empty");
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-6, "2 tokens/s → 0.5 s: {wait:?}");
        assert_eq!(t.try_take("us-east-1", Bucket::RunInstances, 1, t0 + Duration::from_millis(500)), None);
        // Regions are separate buckets, as in EC2.
        assert_eq!(t.try_take("eu-west-1", Bucket::RunInstances, 1, t0), None);
    }

    #[test]
    fn resource_tokens_count_instances_and_a_1000_node_terminate_fits_one_burst() {
        let t = Throttle::default();
        let t0 = Instant::now();
        assert_eq!(t.try_take("r", Bucket::TerminateInstancesResource, 1_000, t0), None);
        let wait = t.try_take("r", Bucket::TerminateInstancesResource, 100, t0).unwrap();
        assert!((wait.as_secs_f64() - 5.0).abs() < 1e-6, "100 instances at 20/s: {wait:?}");
        // A request larger than the bucket waits for a full bucket, never forever.
        assert_eq!(t.try_take("s", Bucket::RunInstancesResource, 5_000, t0), None);
    }

    #[test]
    fn non_mutating_pace_for_a_paged_refresh_never_waits() {
        let t = Throttle::default();
        let t0 = Instant::now();
        for _ in 0..6 {
            assert_eq!(t.try_take("r", Bucket::NonMutating, 1, t0), None);
        }
    }
}
