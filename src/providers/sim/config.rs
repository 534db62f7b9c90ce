//! How a simulated cloud behaves: seed, latency, failure rate, capacity, job length.
//!
//! Tests and benchmarks tune the sim through `GPUPLAN_SIM_*` environment variables; the
//! caller passes the environment in as a map so this module never reads process state.

use std::collections::BTreeMap;
use std::time::Duration;

/// The default limit of live nodes per zone, capacity type and instance type.
pub const DEFAULT_ZONE_CAPACITY: u32 = 1_000;

#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Seeds node and job ids and the failure injection stream.
    pub seed: u64,
    /// Slept before every API call (and before every extra page of a paged call).
    pub latency: Option<Duration>,
    /// Probability (0..=1) that an API call fails with a retryable error before acting.
    pub failure_rate: f64,
    /// Live nodes allowed per zone, capacity type and instance type; `None` means
    /// [`DEFAULT_ZONE_CAPACITY`]. `gpuplan sim capacity` overrides it per zone.
    pub zone_capacity: Option<u32>,
    /// Wall-clock time a launched job runs before it finishes.
    pub job_duration: Duration,
    /// `GPUPLAN_SIM_START` (RFC 3339): where the clock of a newly created world starts.
    pub start_ms: Option<u64>,
    /// Opened by a command that writes nothing: a world that does not exist yet is not
    /// created, but read as an empty cloud kept in memory.
    pub read_only: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            latency: None,
            failure_rate: 0.0,
            zone_capacity: None,
            job_duration: Duration::from_secs(60),
            start_ms: None,
            read_only: false,
        }
    }
}

impl SimConfig {
    /// Overlay `GPUPLAN_SIM_LATENCY` (`50ms`), `GPUPLAN_SIM_FAILURE_RATE` (`0.1`),
    /// `GPUPLAN_SIM_ZONE_CAPACITY`, `GPUPLAN_SIM_SEED` and `GPUPLAN_SIM_JOB_DURATION` (`2m`)
    /// from an environment map. Empty values are ignored.
    pub fn with_env(mut self, env: &BTreeMap<String, String>) -> Result<Self, String> {
        let get = |key: &str| env.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        if let Some(v) = get("GPUPLAN_SIM_LATENCY") {
            let d = duration("GPUPLAN_SIM_LATENCY", v)?;
            self.latency = (!d.is_zero()).then_some(d);
        }
        if let Some(v) = get("GPUPLAN_SIM_FAILURE_RATE") {
            let rate: f64 = v.parse().map_err(|_| bad("GPUPLAN_SIM_FAILURE_RATE", v, "a number from 0 to 1"))?;
            if !(0.0..=1.0).contains(&rate) {
                return Err(bad("GPUPLAN_SIM_FAILURE_RATE", v, "a number from 0 to 1"));
            }
            self.failure_rate = rate;
        }
        if let Some(v) = get("GPUPLAN_SIM_ZONE_CAPACITY") {
            let n = v.parse().map_err(|_| bad("GPUPLAN_SIM_ZONE_CAPACITY", v, "a whole number of nodes"))?;
            self.zone_capacity = Some(n);
        }
        if let Some(v) = get("GPUPLAN_SIM_SEED") {
            self.seed = v.parse().map_err(|_| bad("GPUPLAN_SIM_SEED", v, "a whole number"))?;
        }
        if let Some(v) = get("GPUPLAN_SIM_JOB_DURATION") {
            self.job_duration = duration("GPUPLAN_SIM_JOB_DURATION", v)?;
        }
        if let Some(v) = get("GPUPLAN_SIM_START") {
            let at = humantime::parse_rfc3339_weak(v)
                .map_err(|_| bad("GPUPLAN_SIM_START", v, "an RFC 3339 time such as `2026-03-01T00:00:00Z`"))?;
            let ms = at
                .duration_since(std::time::UNIX_EPOCH)
                .map_err(|_| bad("GPUPLAN_SIM_START", v, "a time after 1970"))?;
            let ms = u64::try_from(ms.as_millis()).unwrap_or(u64::MAX);
            if ms > crate::model::time::LAST_MS {
                let last = crate::model::time::LAST;
                return Err(bad("GPUPLAN_SIM_START", v, &format!("a time no later than {last}")));
            }
            self.start_ms = Some(ms);
        }
        Ok(self)
    }

    /// The limit that applies where `gpuplan sim capacity` set none.
    pub fn default_capacity(&self) -> u32 {
        self.zone_capacity.unwrap_or(DEFAULT_ZONE_CAPACITY)
    }
}

fn duration(key: &str, v: &str) -> Result<Duration, String> {
    crate::model::time::duration(v).map_err(|e| bad(key, v, &format!("a duration such as `50ms` or `2m` ({e})")))
}

fn bad(key: &str, value: &str, expected: &str) -> String {
    format!("{key}=`{value}` is not valid: expected {expected}")
}
