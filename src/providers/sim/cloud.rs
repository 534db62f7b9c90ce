//! [`SimCloud`]: the persistent simulated cloud, its controls and its statistics.
//!
//! The cloud's API calls (what a [`crate::providers::Provider`] may do) live in `nodes.rs`,
//! `jobs.rs` and `offers.rs`; this file opens the cloud and holds the controls that only
//! the cloud itself or a test may use: spot reclaims, capacity, foreign VMs, console
//! deletions.
//!
//! One `Mutex` guards the world and the log. It is never held across an `.await`: callers
//! sleep the latency first, then lock, act, append and unlock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;

use super::config::SimConfig;
use super::error::SimError;
use super::store::Store;
use super::trace;
use super::world::{Change, Record, SimNode, TraceRow, World, end_nodes, now_ms};
use super::{catalog_check, rng};
use crate::addr::Address;
use crate::providers::{Capacity, JobState, Node, NodeState, Tags};

/// How long `open` waits for another process to release the cloud.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(30);
/// Log records after which the snapshot is rewritten and the log emptied (or more, in a
/// world with more nodes and jobs than this: see `Store::wants_compaction`).
pub const COMPACT_AFTER: usize = 10_000;

/// Calls per API, pages served and injected failures, for benchmarks. Counts cover this
/// process only.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SimStats {
    /// API name (`create_nodes`, `list_nodes`, `terminate_nodes` per batch of ≤1,000, ...)
    /// → calls, including the ones that failed by injection.
    pub calls: BTreeMap<String, u64>,
    /// Pages of ≤1,000 nodes served by `list_nodes`.
    pub pages: u64,
    /// Calls failed by failure injection.
    pub injected_failures: u64,
    /// Records appended to the event log.
    pub records: u64,
}

pub struct SimCloud {
    path: PathBuf,
    pub(super) config: SimConfig,
    inner: Mutex<Inner>,
}

pub(super) struct Inner {
    pub world: World,
    store: Store,
    pub stats: SimStats,
    /// API calls made in this process: numbers the failure-injection draws.
    pub calls: u64,
}

impl Inner {
    /// Persist the changes as one log record, then apply them.
    pub fn commit(&mut self, changes: Vec<Change>) -> Result<(), SimError> {
        if changes.is_empty() {
            return Ok(());
        }
        let record = Record { seq: self.world.seq + 1, at_ms: now_ms(), changes };
        self.store.append(&record)?;
        self.world.apply_record(record);
        self.stats.records += 1;
        if self.store.wants_compaction(self.world.nodes.len() + self.world.jobs.len()) {
            // The record is already durable; a failed compaction is retried on a later call
            // or at the next open, so it must not fail this one.
            let _ = self.store.compact(&mut self.world);
        }
        Ok(())
    }

    /// Reclaim the spot nodes of every trace row with `available_nodes = 0` that the sim
    /// clock passed since the last call ([`trace::reclaims_due`]), and record that it did.
    pub fn trace_reclaims(&mut self) -> Result<(), SimError> {
        match trace::reclaims_due(&self.world) {
            Some(changes) => self.commit(changes),
            None => Ok(()),
        }
    }

    /// The next id from the seed and the persisted counter, skipping any id in use (only
    /// possible when a cloud is reopened with another seed).
    pub fn next_id(&mut self, prefix: &str, seed: u64, next: &mut u64) -> String {
        loop {
            let id = rng::id(prefix, seed, *next);
            *next += 1;
            if !self.world.nodes.contains_key(&id) && !self.world.jobs.contains_key(&id) {
                return id;
            }
        }
    }
}

impl SimCloud {
    /// Open (or create) the cloud kept at `path` (gpuplan uses `state/<workspace>.sim.json`),
    /// waiting up to 30 s for another process to close it.
    pub fn open(path: &Path, config: SimConfig) -> Result<Arc<SimCloud>, SimError> {
        Self::open_with_timeout(path, config, LOCK_TIMEOUT)
    }

    pub fn open_with_timeout(
        path: &Path,
        config: SimConfig,
        lock_timeout: Duration,
    ) -> Result<Arc<SimCloud>, SimError> {
        Self::open_inner(path, config, lock_timeout, COMPACT_AFTER, None)
    }

    /// [`open`](Self::open), with the files already read and parsed before the lock
    /// (used only if they are unchanged, see [`Preread`](super::Preread)).
    pub fn open_preread(
        path: &Path,
        config: SimConfig,
        pre: Option<super::Preread>,
    ) -> Result<Arc<SimCloud>, SimError> {
        Self::open_inner(path, config, LOCK_TIMEOUT, COMPACT_AFTER, pre)
    }

    pub(super) fn open_inner(
        path: &Path,
        config: SimConfig,
        lock_timeout: Duration,
        compact_after: usize,
        pre: Option<super::Preread>,
    ) -> Result<Arc<SimCloud>, SimError> {
        let (store, world) = Store::open(path, lock_timeout, compact_after, pre, !config.read_only)?;
        // A clock moved past what gpuplan prints (by a gpuplan before this check) would
        // fail every command that prints a time: say so, and how to get out, once here.
        if world.now_ms() > crate::model::time::LAST_MS {
            let log = super::store::sibling(path, ".log");
            return Err(SimError::ClockPastRange { path: path.to_path_buf(), log });
        }
        let fresh = world.seq == 0;
        let mut inner = Inner { world, store, stats: SimStats::default(), calls: 0 };
        // `GPUPLAN_SIM_START` sets the clock of a new world only: an existing world's
        // history (launch times, spend) must not jump.
        if let (true, Some(start)) = (fresh, config.start_ms) {
            inner.commit(vec![Change::Clock { offset_ms: start as i64 - now_ms() as i64 }])?;
        }
        Ok(Arc::new(SimCloud { path: path.to_path_buf(), config, inner: Mutex::new(inner) }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        // Changes are applied only after they are persisted, so a panic elsewhere cannot
        // leave a half-applied world behind: the poison flag carries no information.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Spot reclaim: mark up to `count` live spot nodes of `pool` reclaimed, highest ids
    /// first (deterministic), and preempt their jobs. `pool` without an instance key covers
    /// every instance (`gpu_pool.train` covers `gpu_pool.train[0]`).
    pub fn interrupt(&self, pool: &Address, count: u32) -> Result<Vec<String>, SimError> {
        let mut inner = self.lock();
        let ids: Vec<String> = inner
            .world
            .nodes
            .values()
            .rev()
            .filter(|n| n.is_live() && n.capacity == Capacity::Spot && n.is_managed())
            .filter(|n| n.pool.as_ref().is_some_and(|p| p.matches_target(pool)))
            .take(count as usize)
            .map(|n| n.id.clone())
            .collect();
        let changes = end_nodes(&inner.world, &ids, NodeState::Reclaimed, JobState::Preempted, "node reclaimed (spot)");
        inner.commit(changes)?;
        Ok(ids)
    }

    /// Move the sim clock forward by `by` (`gpuplan sim advance`): nodes accrue hours and
    /// jobs progress as if that time had passed. Returns the new sim time (ms).
    pub fn advance(&self, by: Duration) -> Result<u64, SimError> {
        let mut inner = self.lock();
        let too_far = || {
            SimError::Invalid(format!(
                "moving the sim clock {} from {} would carry it past {}, the last time gpuplan can print",
                humantime::format_duration(by),
                crate::model::time::rfc3339_ms(inner.world.now_ms()),
                crate::model::time::LAST
            ))
        };
        let by_ms = i64::try_from(by.as_millis()).map_err(|_| too_far())?;
        let offset_ms = inner.world.clock_offset_ms.saturating_add(by_ms);
        // Checked before the clock is written: nothing is written for a refused move.
        let after = (now_ms() as i64).saturating_add(offset_ms);
        if u64::try_from(after).is_ok_and(|t| t > crate::model::time::LAST_MS) {
            return Err(too_far());
        }
        inner.commit(vec![Change::Clock { offset_ms }])?;
        inner.trace_reclaims()?;
        // EC2 takes a Capacity Block's instances back when its window closes.
        let closed = super::reserved_room::window_closed(&inner.world);
        if !closed.is_empty() {
            let why = "node reclaimed: its Capacity Block's window closed";
            let changes = end_nodes(&inner.world, &closed, NodeState::Reclaimed, JobState::Preempted, why);
            inner.commit(changes)?;
        }
        Ok(inner.world.now_ms())
    }

    /// The sim clock (ms since the epoch).
    pub fn now_ms(&self) -> u64 {
        self.lock().world.now_ms()
    }

    /// Limit live nodes per instance type of `capacity` in `zone`; `None` restores the default.
    pub fn set_capacity(&self, zone: &str, capacity: Capacity, limit: Option<u32>) -> Result<(), SimError> {
        if catalog_check::region_of_zone(zone).is_none() {
            return Err(SimError::Invalid(format!("unknown zone `{zone}`: no catalog region has it")));
        }
        let change = Change::Limit { zone: zone.to_string(), capacity, limit };
        self.lock().commit(vec![change])
    }

    /// The limit in force for one instance type of `capacity` in `zone`.
    pub fn capacity(&self, zone: &str, capacity: Capacity) -> u32 {
        self.lock().world.limit(zone, capacity).unwrap_or_else(|| self.config.default_capacity())
    }

    /// A VM someone else runs (no gpuplan tags), for tests: the API never lists or deletes it.
    pub fn insert_untagged(&self, region: &str, zone: &str, instance_type: &str) -> Result<String, SimError> {
        let t = catalog_check::placeable(region, zone, &[instance_type.to_string()])
            .map_err(|e| SimError::Invalid(e.message))?;
        let mut inner = self.lock();
        let mut next = inner.world.counter;
        let id = inner.next_id("i-", self.config.seed, &mut next);
        let node = SimNode {
            id: id.clone(),
            pool: None,
            instance_type: t[0].name.clone(),
            region: region.to_string(),
            zone: zone.to_string(),
            capacity: Capacity::OnDemand,
            state: NodeState::Running,
            image: None,
            tags: Tags::new(),
            launched_ms: inner.world.now_ms(),
            ended_ms: None,
            hardware: None,
        };
        inner.commit(vec![Change::Counter { next }, Change::Nodes { nodes: vec![node] }])?;
        Ok(id)
    }

    /// Someone deletes a node in the console (drift tests): no tag check, no API call.
    pub fn terminate_out_of_band(&self, id: &str) -> Result<(), SimError> {
        let mut inner = self.lock();
        if !inner.world.nodes.contains_key(id) {
            return Err(SimError::Invalid(format!("no node `{id}` in the simulated cloud")));
        }
        let changes =
            end_nodes(&inner.world, &[id.to_string()], NodeState::Terminated, JobState::Failed, "node terminated");
        inner.commit(changes)
    }

    /// Every node, tagged or not, in any state, sorted by id.
    pub fn nodes(&self) -> Vec<Node> {
        self.lock().world.nodes.values().map(SimNode::to_node).collect()
    }

    /// Fold the event log into the snapshot if [`Store::wants_settling`] says so; called
    /// when a command that changed the cloud (`apply`, `destroy`) is done. Returns whether
    /// it did. On error the log is kept as it was and the next open replays it.
    pub fn settle(&self) -> Result<bool, SimError> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        if !inner.store.wants_settling(inner.world.nodes.len() + inner.world.jobs.len()) {
            return Ok(false);
        }
        inner.store.compact(&mut inner.world)?;
        Ok(true)
    }

    /// The command is done with the cloud: its lock file is removed and the lock released
    /// (see `Store::close`); any later change is refused. For commands that leave the
    /// cloud to the process's exit instead of dropping it.
    pub fn close(&self) {
        self.lock().store.close();
    }

    pub fn stats(&self) -> SimStats {
        self.lock().stats.clone()
    }

    /// Load a price and capacity trace ([`trace::parse`]), replacing any earlier one; its
    /// reclaims already due happen now.
    pub fn load_trace(&self, rows: Vec<TraceRow>) -> Result<(), SimError> {
        let mut inner = self.lock();
        inner.commit(vec![Change::Trace { rows }])?;
        inner.trace_reclaims()
    }
}
