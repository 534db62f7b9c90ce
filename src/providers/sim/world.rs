//! What the simulated cloud holds, and the only way it changes: [`Change`]s.
//!
//! Every mutation is first written down as a [`Record`] of changes (appended to the log by
//! `store.rs`), then applied here. Replaying the log at open goes through the same
//! [`World::apply`], so a reopened cloud is exactly the one that was left. Changes are facts
//! ("these nodes are now reclaimed"), never commands to re-run, so replay needs no clock,
//! no config and no randomness. This module does no I/O.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

pub use super::snapshot::{SimNode, TokenRecord};
use crate::addr::Address;
use crate::json_text::Key;
use crate::model::health::NodeHealth;
use crate::providers::{Capacity, JobState, JobStatus, NodeState};

/// Snapshot format written by this version; newer files are refused. 2: nodes in groups
/// alike, tokens by their ids alone ([`super::snapshot`]); format 1 reads as it is.
pub const FORMAT_VERSION: u32 = 2;

/// How long a reclaimed node stays listed after it ended, as EC2 lists a terminated
/// instance for about an hour.
pub const GONE_AFTER_MS: u64 = 3_600_000;

/// A job run. Until `ended` is set its state follows the clock: running until `ends_ms`,
/// then succeeded (or failed when `will_fail`). Fixing `ends_ms` at launch keeps the outcome
/// independent of the config of whichever process looks later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimJob {
    pub id: String,
    pub job: Address,
    pub pool: Address,
    pub node_id: String,
    pub region: String,
    pub attempt: u32,
    pub token: String,
    pub started_ms: u64,
    pub ends_ms: u64,
    pub will_fail: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<JobEnd>,
    /// A multi-node job's replica: the rendezvous variables its launch carried
    /// (`GPUPLAN_MASTER_ADDR`, `GPUPLAN_NODE_RANK`, ...), as its container sees them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rendezvous: BTreeMap<String, String>,
}

/// A sim node's private address, the same for the same node id: `10.x.y.z`.
pub fn private_address(node_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(node_id.as_bytes());
    format!("10.{}.{}.{}", d[0], d[1], d[2].max(1))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEnd {
    pub state: JobState,
    pub at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl SimJob {
    pub fn is_running(&self, now_ms: u64) -> bool {
        self.ended.is_none() && now_ms < self.ends_ms
    }

    pub fn status(&self, now_ms: u64) -> JobStatus {
        let (state, message) = match &self.ended {
            Some(end) => (end.state, end.message.clone()),
            None if now_ms < self.ends_ms => (JobState::Running, None),
            None if self.will_fail => (JobState::Failed, Some("simulated job failure (failure injection)".into())),
            None => (JobState::Succeeded, None),
        };
        JobStatus {
            id: self.id.clone(),
            job: self.job.clone(),
            node_id: self.node_id.clone(),
            state,
            attempt: self.attempt,
            message,
            started_ms: Some(self.started_ms),
            // Ended early (reclaim, cancel) or ran its course.
            finished_ms: match &self.ended {
                Some(end) => Some(end.at_ms),
                None if now_ms >= self.ends_ms => Some(self.ends_ms),
                None => None,
            },
            // Told to the replicas of multi-node jobs, which rendezvous on it.
            address: (!self.rendezvous.is_empty()).then(|| private_address(&self.node_id)),
        }
    }
}

/// One fact about the cloud. A log line holds the changes of one API call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Change {
    /// The id counter moved on (ids are derived from it and the seed).
    Counter {
        next: u64,
    },
    /// Nodes created (or replaced whole).
    Nodes {
        nodes: Vec<SimNode>,
    },
    NodeState {
        ids: Vec<String>,
        state: NodeState,
    },
    Token {
        token: String,
        record: TokenRecord,
    },
    /// A capacity override for a zone; `None` restores the default.
    Limit {
        zone: String,
        capacity: Capacity,
        limit: Option<u32>,
    },
    Job {
        job: SimJob,
    },
    JobsEnded {
        ids: Vec<String>,
        end: JobEnd,
    },
    /// The sim clock's distance from the wall clock (`GPUPLAN_SIM_START`, `sim advance`).
    Clock {
        offset_ms: i64,
    },
    /// A price and capacity trace (`gpuplan sim trace`), replacing any earlier one.
    Trace {
        rows: Vec<TraceRow>,
    },
    /// The trace's spot reclaims are done up to this sim time.
    TraceDone {
        ms: u64,
    },
    /// What a node's GPU health reads answer from now on (`gpuplan sim fault`); `None`:
    /// healthy again.
    Fault {
        node_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        health: Option<NodeHealth>,
    },
    /// A reservation bought, or its new state (cancelled).
    Reservation {
        reservation: SimReservation,
    },
}

/// A reservation the sim holds (`reservations.rs`), with the token it was bought under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimReservation {
    #[serde(flatten)]
    pub reserved: crate::model::reservation::Reserved,
    pub region: String,
    pub token: String,
    /// The address it was bought for (its ownership tag).
    pub address: String,
}

/// One row of a price and capacity trace: from `at_ms` on (until a later row for the same
/// region, GPU and capacity), this price and capacity hold in `region`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceRow {
    pub at_ms: u64,
    pub region: String,
    pub gpu: String,
    pub capacity: Capacity,
    /// USD per GPU-hour.
    pub price_usd_gpu_hour: f64,
    /// How many more nodes of this capacity the region can launch; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_nodes: Option<u32>,
}

/// One line of the event log: the changes of one call, numbered so that replay can skip
/// what the snapshot already holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    pub at_ms: u64,
    #[serde(deserialize_with = "changes")]
    pub changes: Vec<Change>,
}

/// A record's changes, the common ones read straight into place.
///
/// serde reads an internally tagged enum (`{"op": "nodes", ...}`) by first copying the
/// whole object into a buffer of its own, in case the tag comes last; then it reads the
/// variant from that copy. Opening a sim cloud replays every line of its log, and three
/// changes per create call are most of them: this reads those three (`counter`, `nodes`,
/// `token`) directly when `op` comes first, as gpuplan writes it. Any other change, or `op`
/// written later, goes through the derived reading from a [`serde_json::Value`], so what
/// is accepted, and what each change holds, is the same as before.
fn changes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Change>, D::Error> {
    struct Changes;
    impl<'de> serde::de::Visitor<'de> for Changes {
        type Value = Vec<Change>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of changes")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Change>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(OpFirst(change)) = seq.next_element()? {
                out.push(change);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Changes)
}

/// One change, read without a buffer when its `op` comes first (see [`changes`]).
struct OpFirst(Change);

impl<'de> Deserialize<'de> for OpFirst {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(OpFirstVisitor)
    }
}

struct OpFirstVisitor;

impl<'de> serde::de::Visitor<'de> for OpFirstVisitor {
    type Value = OpFirst;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a change (an object with `op`)")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<OpFirst, A::Error> {
        use serde::de::value::MapAccessDeserializer;
        #[derive(Deserialize)]
        struct CounterFields {
            next: u64,
        }
        #[derive(Deserialize)]
        struct NodesFields {
            nodes: Vec<SimNode>,
        }
        #[derive(Deserialize)]
        struct TokenFields {
            token: String,
            record: TokenRecord,
        }
        let mut rest = serde_json::Map::new();
        match map.next_key::<Key<'de>>()? {
            Some(Key(key)) if key == "op" => {
                let Key(op) = map.next_value()?;
                let rest_of = MapAccessDeserializer::new(map);
                return match &*op {
                    "counter" => CounterFields::deserialize(rest_of).map(|f| Change::Counter { next: f.next }),
                    "nodes" => NodesFields::deserialize(rest_of).map(|f| Change::Nodes { nodes: f.nodes }),
                    "token" => {
                        TokenFields::deserialize(rest_of).map(|f| Change::Token { token: f.token, record: f.record })
                    }
                    _ => {
                        let mut rest = serde_json::Map::<String, serde_json::Value>::deserialize(rest_of)?;
                        rest.insert("op".into(), op.into_owned().into());
                        Change::deserialize(serde_json::Value::Object(rest)).map_err(serde::de::Error::custom)
                    }
                }
                .map(OpFirst);
            }
            Some(Key(key)) => {
                let value: serde_json::Value = map.next_value()?;
                rest.insert(key.into_owned(), value);
            }
            None => {}
        }
        while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
            rest.insert(key, value);
        }
        Change::deserialize(serde_json::Value::Object(rest)).map(OpFirst).map_err(serde::de::Error::custom)
    }
}

/// The whole cloud; serialized as the snapshot file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct World {
    pub format_version: u32,
    /// The last record applied.
    pub seq: u64,
    pub counter: u64,
    #[serde(default)]
    pub limits: BTreeMap<String, BTreeMap<Capacity, u32>>,
    /// Written as [`super::snapshot`] says: by token, the ids alone where they are all it asked for.
    #[serde(default, serialize_with = "super::snapshot::tokens_out", deserialize_with = "crate::model::exact::map")]
    pub tokens: BTreeMap<String, TokenRecord>,
    /// Written as groups of nodes alike ([`super::snapshot`]); format 1's map by id reads too.
    #[serde(default, serialize_with = "super::snapshot::nodes_out", deserialize_with = "super::snapshot::nodes_in")]
    pub nodes: BTreeMap<String, SimNode>,
    #[serde(default)]
    pub jobs: BTreeMap<String, SimJob>,
    /// The sim clock runs this far ahead of the wall clock (it never runs behind a start
    /// set in the past either: it is an offset, so time still passes between commands).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clock_offset_ms: i64,
    /// The price and capacity trace, sorted by time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<TraceRow>,
    /// Spot reclaims of trace rows up to this sim time are done.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub trace_done_ms: u64,
    /// Scripted GPU faults by node id (`gpuplan sim fault`): what its health reads answer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub faults: BTreeMap<String, NodeHealth>,
    /// Reservations bought, by id (`reservations.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reservations: BTreeMap<String, SimReservation>,
    /// Live nodes per (zone, capacity, instance type): derived, kept so a create does not
    /// scan every node.
    #[serde(skip)]
    live: HashMap<(String, Capacity, String), u32>,
    /// Job launch token → job id: derived from `jobs`.
    #[serde(skip)]
    job_tokens: HashMap<String, String>,
}

impl Default for World {
    fn default() -> Self {
        World {
            format_version: FORMAT_VERSION,
            seq: 0,
            counter: 0,
            limits: BTreeMap::new(),
            tokens: BTreeMap::new(),
            nodes: BTreeMap::new(),
            jobs: BTreeMap::new(),
            clock_offset_ms: 0,
            trace: Vec::new(),
            trace_done_ms: 0,
            faults: BTreeMap::new(),
            reservations: BTreeMap::new(),
            live: HashMap::new(),
            job_tokens: HashMap::new(),
        }
    }
}

impl World {
    /// Rebuild the derived indexes after deserializing. Live nodes are counted under
    /// borrowed keys, each of the few (zone, capacity, type) keys copied once: a key copied
    /// per node was 8,000 strings for a world of 4,000 nodes.
    pub fn reindex(&mut self) {
        let mut counts: HashMap<(&str, Capacity, &str), u32> = HashMap::new();
        for n in self.nodes.values().filter(|n| n.is_live()) {
            *counts.entry((n.zone.as_str(), n.capacity, n.instance_type.as_str())).or_default() += 1;
        }
        let live = counts.into_iter().map(|((zone, c, t), n)| ((zone.to_string(), c, t.to_string()), n)).collect();
        self.live = live;
        self.job_tokens = self.jobs.values().map(|j| (j.token.clone(), j.id.clone())).collect();
    }

    pub fn live_count(&self, zone: &str, capacity: Capacity, instance_type: &str) -> u32 {
        self.live.get(&(zone.to_string(), capacity, instance_type.to_string())).copied().unwrap_or(0)
    }

    pub fn limit(&self, zone: &str, capacity: Capacity) -> Option<u32> {
        self.limits.get(zone).and_then(|m| m.get(&capacity)).copied()
    }

    pub fn job_by_token(&self, token: &str) -> Option<&SimJob> {
        self.job_tokens.get(token).and_then(|id| self.jobs.get(id))
    }

    pub fn apply_record(&mut self, record: Record) {
        self.seq = record.seq;
        for change in record.changes {
            // The sim clock when the record was written (records keep the wall clock).
            let at = u64::try_from((record.at_ms as i64).saturating_add(self.clock_offset_ms)).unwrap_or(0);
            self.apply(change, at);
        }
    }

    fn apply(&mut self, change: Change, at_ms: u64) {
        match change {
            Change::Counter { next } => self.counter = self.counter.max(next),
            Change::Nodes { nodes } => {
                for node in nodes {
                    self.count_live(&node, 1);
                    if let Some(old) = self.nodes.insert(node.id.clone(), node) {
                        self.count_live(&old, -1);
                    }
                }
            }
            Change::NodeState { ids, state } => {
                for id in ids {
                    let Some(mut node) = self.nodes.remove(&id) else { continue };
                    self.count_live(&node, -1);
                    node.state = state;
                    if !node.is_live() {
                        node.ended_ms.get_or_insert(at_ms);
                    }
                    self.count_live(&node, 1);
                    self.nodes.insert(id, node);
                }
            }
            Change::Token { token, record } => {
                self.tokens.insert(token, record);
            }
            Change::Limit { zone, capacity, limit } => {
                let zone_limits = self.limits.entry(zone.clone()).or_default();
                match limit {
                    Some(n) => zone_limits.insert(capacity, n),
                    None => zone_limits.remove(&capacity),
                };
                if zone_limits.is_empty() {
                    self.limits.remove(&zone);
                }
            }
            Change::Job { job } => {
                self.job_tokens.insert(job.token.clone(), job.id.clone());
                self.jobs.insert(job.id.clone(), job);
            }
            Change::Clock { offset_ms } => self.clock_offset_ms = offset_ms,
            Change::Trace { rows } => {
                self.trace = rows;
                self.trace_done_ms = 0;
            }
            Change::TraceDone { ms } => self.trace_done_ms = self.trace_done_ms.max(ms),
            Change::Fault { node_id, health: Some(h) } => {
                self.faults.insert(node_id, h);
            }
            Change::Fault { node_id, health: None } => {
                self.faults.remove(&node_id);
            }
            Change::Reservation { reservation } => {
                self.reservations.insert(reservation.reserved.id.clone(), reservation);
            }
            Change::JobsEnded { ids, end } => {
                for id in ids {
                    if let Some(job) = self.jobs.get_mut(&id) {
                        job.ended = Some(end.clone());
                    }
                }
            }
        }
    }

    fn count_live(&mut self, node: &SimNode, delta: i32) {
        if !node.is_live() {
            return;
        }
        let n = self.live.entry(live_key(node)).or_default();
        *n = n.saturating_add_signed(delta);
    }

    /// Forget terminated nodes, and reclaimed ones [`GONE_AFTER_MS`] after they ended with
    /// their launch tokens (at compaction): nothing can bring them back, and keeping them
    /// would grow the world with every spot reclaim. A terminated node's token stays, so
    /// a retried create is still answered by what the first one did; a reclaimed node's
    /// goes an hour later, when a retry is no longer a retry.
    pub fn drop_gone(&mut self) {
        let now = self.now_ms();
        let mut reclaimed = std::collections::HashSet::new();
        self.nodes.retain(|id, n| match n.state {
            NodeState::Terminated => false,
            // A world written before `ended_ms` existed: its hour starts now.
            NodeState::Reclaimed if n.ended_ms.get_or_insert(now).saturating_add(GONE_AFTER_MS) <= now => {
                reclaimed.insert(id.clone());
                false
            }
            _ => true,
        });
        if !reclaimed.is_empty() {
            let nodes = &self.nodes;
            self.tokens.retain(|_, t| {
                !t.ids.iter().any(|id| reclaimed.contains(id)) || t.ids.iter().any(|id| nodes.contains_key(id))
            });
        }
        // A forgotten node's fault goes with it.
        let nodes = &self.nodes;
        self.faults.retain(|id, _| nodes.contains_key(id));
    }

    /// Jobs still running on any of `node_ids` at `now_ms`.
    pub fn running_jobs_on(&self, node_ids: &[String], now_ms: u64) -> Vec<String> {
        let on: std::collections::HashSet<&str> = node_ids.iter().map(String::as_str).collect();
        self.jobs
            .values()
            .filter(|j| j.is_running(now_ms) && on.contains(j.node_id.as_str()))
            .map(|j| j.id.clone())
            .collect()
    }
}

fn live_key(n: &SimNode) -> (String, Capacity, String) {
    (n.zone.clone(), n.capacity, n.instance_type.clone())
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

impl World {
    /// The trace row in force at `now_ms` for `region`, `gpu` and `capacity`, if any.
    pub fn trace_row(&self, region: &str, gpu: &str, capacity: Capacity, now_ms: u64) -> Option<&TraceRow> {
        self.trace
            .iter()
            .filter(|r| r.at_ms <= now_ms && r.region == region && r.gpu == gpu && r.capacity == capacity)
            .max_by_key(|r| r.at_ms)
    }
}

impl World {
    /// The sim cloud's clock: the wall clock moved by [`World::clock_offset_ms`]. Launch
    /// times, job progress and spend on sim pools follow it.
    pub fn now_ms(&self) -> u64 {
        let wall = now_ms() as i64;
        u64::try_from(wall.saturating_add(self.clock_offset_ms)).unwrap_or(0)
    }
}

/// Changes that move `ids` (those not already ended) to `state` and end their running jobs.
pub fn end_nodes(world: &World, ids: &[String], state: NodeState, job: JobState, why: &str) -> Vec<Change> {
    let ids: Vec<String> = ids
        .iter()
        .filter(|id| world.nodes.get(*id).is_some_and(|n| n.state != NodeState::Terminated && n.state != state))
        .cloned()
        .collect();
    if ids.is_empty() {
        return Vec::new();
    }
    let now = world.now_ms();
    let jobs = world.running_jobs_on(&ids, now);
    let mut changes = vec![Change::NodeState { ids, state }];
    if !jobs.is_empty() {
        changes
            .push(Change::JobsEnded { ids: jobs, end: JobEnd { state: job, at_ms: now, message: Some(why.into()) } });
    }
    changes
}

/// The wall clock, in ms since the epoch.
pub fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}
