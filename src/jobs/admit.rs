//! Admission: which waiting jobs get GPUs now, on which capacity, and why the others wait.
//!
//! Pure and deterministic: the caller (`place.rs`) reads the spec, the state and the
//! plan into [`Demand`]s, [`PoolRoom`]s and [`QuotaRoom`]s; this module only decides.
//!
//! Order: priority (critical > high > medium > low), then age (first seen, oldest
//! first; jobs never seen before come after, by address). Each replica needs all its
//! GPUs on one node. Preemptible jobs prefer spot nodes and use on-demand ones only when
//! the pool's `mix.fallback` is `on_demand`; other jobs use on-demand nodes only. A job is
//! admitted whole (every replica) or not at all; a job that does not fit does not block
//! smaller, lower-priority jobs behind it (backfill). Running jobs keep their GPUs: the
//! caller has already taken them out of the room.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::jobs::model::{WaitCode, WaitReason, priority_str};
use crate::model::money::usd;
use crate::providers::Capacity;
use crate::spec::model::{Fallback, Priority};

/// One job asking for GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    pub address: Address,
    pub pool: Address,
    pub quota: Option<Address>,
    pub priority: Priority,
    /// First seen (RFC 3339); `None` for a job new in this plan.
    pub age: Option<String>,
    pub preemptible: bool,
    /// Replicas to place now.
    pub replicas: u32,
    pub gpus_per_replica: u32,
}

impl Demand {
    pub fn gpus(&self) -> u64 {
        self.replicas as u64 * self.gpus_per_replica as u64
    }
}

/// Free GPUs on one node (planned or live).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRoom {
    pub capacity: Capacity,
    pub free: u32,
    /// The live node's id; `None` for a node this plan creates.
    pub id: Option<String>,
}

/// A pool's nodes as they will be after this plan, with what running jobs already use.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolRoom {
    pub gpu: String,
    pub gpus_per_node: u32,
    pub fallback: Fallback,
    pub nodes: Vec<NodeRoom>,
    /// USD per GPU-hour on on-demand and on spot nodes, when known (for budgets).
    pub usd_per_gpu_hour_on_demand: Option<f64>,
    pub usd_per_gpu_hour_spot: Option<f64>,
}

impl PoolRoom {
    fn price(&self, c: Capacity) -> f64 {
        match c {
            Capacity::OnDemand | Capacity::Reserved => self.usd_per_gpu_hour_on_demand,
            Capacity::Spot => self.usd_per_gpu_hour_spot,
        }
        .unwrap_or(0.0)
    }
}

/// A quota's limits and what running jobs already use of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QuotaRoom {
    pub max_gpus: Option<u64>,
    /// Allowed GPU models; empty allows all.
    pub allowed_gpus: Vec<String>,
    pub hourly_usd: Option<f64>,
    pub monthly_usd: Option<f64>,
    pub used_gpus: u64,
    pub used_hourly_usd: f64,
    /// Fair-share weight (`None`: 1).
    pub weight: Option<f64>,
}

impl QuotaRoom {
    /// GPUs in use per unit of weight: the quota's dominant share (GPUs are the resource).
    fn share(&self) -> f64 {
        self.used_gpus as f64 / self.weight.unwrap_or(1.0).max(1e-9)
    }
}

/// The decision for one job.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    pub address: Address,
    /// The capacity type of each replica when admitted.
    pub placed: Option<Vec<Capacity>>,
    pub reason: Option<WaitReason>,
}

/// The order jobs are considered in.
pub fn order(demands: &mut [Demand]) {
    demands.sort_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then_with(|| match (&a.age, &b.age) {
                (Some(x), Some(y)) => x.cmp(y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            })
            .then_with(|| a.address.cmp(&b.address))
    });
}

/// Admit `demands` into `pools` within `quotas`. Returns one decision per demand, in
/// admission order.
///
/// Near-linear in the queue (n log n): pools and quotas are looked up once per job and
/// then used by index, fair share keeps one queue per quota ordered by share, and what
/// earlier admissions took from each pool is kept as running totals per priority, so no
/// job re-scans the queue or the jobs admitted before it. `reference::admit` is the
/// straightforward version it is tested against.
pub fn admit(
    mut demands: Vec<Demand>,
    pools: &BTreeMap<Address, PoolRoom>,
    quotas: &BTreeMap<Address, QuotaRoom>,
) -> Vec<Admission> {
    order(&mut demands);
    let mut round = Round::new(pools, quotas);
    let slots: Vec<Slot> = demands.iter().map(|d| round.slot(d)).collect();
    // Fair share, when a quota sets `weight`: among the waiting jobs of the highest
    // priority left, the one whose quota uses the fewest GPUs per unit of weight goes
    // next (ties: age); otherwise priority, then age.
    let fair = quotas.values().any(|q| q.weight.is_some());
    let mut out = Vec::with_capacity(demands.len());
    let mut start = 0;
    while start < demands.len() {
        let top = demands[start].priority;
        let end = start + demands[start..].iter().take_while(|d| d.priority == top).count();
        if fair {
            round.fair_level(&demands, &slots, start..end, &mut out);
        } else {
            for i in start..end {
                out.push(round.decide(&demands[i], slots[i], false));
            }
        }
        start = end;
    }
    out
}

/// A demand's pool and quota, as indices into the round's vectors (`None`: not known).
#[derive(Debug, Clone, Copy)]
struct Slot {
    pool: Option<usize>,
    quota: Option<usize>,
}

/// The state of one admission round: pools and quotas by index, as earlier admissions
/// left them.
struct Round<'a> {
    pool_index: BTreeMap<&'a Address, usize>,
    quota_index: BTreeMap<&'a Address, usize>,
    quota_names: Vec<&'a Address>,
    initial: Vec<&'a [NodeRoom]>,
    pools: Vec<PoolRoom>,
    quotas: Vec<QuotaRoom>,
    took: Vec<Took>,
}

impl<'a> Round<'a> {
    fn new(pools: &'a BTreeMap<Address, PoolRoom>, quotas: &'a BTreeMap<Address, QuotaRoom>) -> Self {
        Round {
            pool_index: pools.keys().enumerate().map(|(i, a)| (a, i)).collect(),
            quota_index: quotas.keys().enumerate().map(|(i, a)| (a, i)).collect(),
            quota_names: quotas.keys().collect(),
            initial: pools.values().map(|r| r.nodes.as_slice()).collect(),
            pools: pools.values().cloned().collect(),
            quotas: quotas.values().cloned().collect(),
            took: pools.values().map(|_| Took::default()).collect(),
        }
    }

    fn slot(&self, d: &Demand) -> Slot {
        Slot {
            pool: self.pool_index.get(&d.pool).copied(),
            quota: d.quota.as_ref().and_then(|q| self.quota_index.get(q)).copied(),
        }
    }

    /// GPUs in use per unit of weight of a fair-share group (no quota: 0), as a key that
    /// sorts like `f64::total_cmp`.
    fn share_key(&self, quota: Option<usize>) -> i64 {
        let share = quota.map_or(0.0, |q| self.quotas[q].share());
        let bits = share.to_bits() as i64;
        bits ^ (((bits >> 63) as u64) >> 1) as i64
    }

    /// One priority level under fair share: the jobs of each quota wait in their own
    /// queue (in admission order); the next job is the head with the lowest share of
    /// its quota, ties by position. Only the quota of the job just decided changes its
    /// share, so only its queue moves in the ordered set.
    fn fair_level(
        &mut self,
        demands: &[Demand],
        slots: &[Slot],
        range: std::ops::Range<usize>,
        out: &mut Vec<Admission>,
    ) {
        let mut queues: BTreeMap<Option<usize>, std::collections::VecDeque<usize>> = BTreeMap::new();
        for i in range {
            queues.entry(slots[i].quota).or_default().push_back(i);
        }
        let mut next: std::collections::BTreeSet<(i64, usize, Option<usize>)> =
            queues.iter().filter_map(|(q, jobs)| jobs.front().map(|i| (self.share_key(*q), *i, *q))).collect();
        while let Some((_, i, q)) = next.pop_first() {
            let Some(queue) = queues.get_mut(&q) else { continue };
            queue.pop_front();
            out.push(self.decide(&demands[i], slots[i], true));
            if let Some(head) = queues.get(&q).and_then(|jobs| jobs.front()) {
                next.insert((self.share_key(q), *head, q));
            }
        }
    }

    /// The decision for one job; an admitted job's GPUs come off its pool and quota.
    fn decide(&mut self, d: &Demand, slot: Slot, fair: bool) -> Admission {
        let mut decision = self.decide_inner(d, slot);
        // Why it came after others of its priority: its quota's share.
        if fair
            && let (Some(r), Some(q)) = (decision.reason.as_mut(), slot.quota)
            && matches!(r.code, WaitCode::Capacity)
        {
            let (name, qr) = (self.quota_names[q], &self.quotas[q]);
            r.message += &format!(
                " (fair share: `{name}` has {} GPUs in use at weight {}, so quotas using less per weight went first)",
                qr.used_gpus,
                qr.weight.unwrap_or(1.0)
            );
        }
        decision
    }

    fn decide_inner(&mut self, d: &Demand, slot: Slot) -> Admission {
        let Some(p) = slot.pool else {
            return wait(d, WaitCode::Capacity, format!("`{}` has no nodes in this plan", d.pool));
        };
        let room = &self.pools[p];
        if let Some(q) = slot.quota
            && let Some(refused) = quota_refuses(d, self.quota_names[q], &self.quotas[q], &room.gpu)
        {
            return refused;
        }
        let prefs = preferences(d, room.fallback);
        let Some(used) = fit(&room.nodes, d, &prefs) else {
            return self.why_not(d, p, &prefs);
        };
        let placed: Vec<Capacity> = used.iter().map(|i| room.nodes[*i].capacity).collect();
        if let Some(q) = slot.quota {
            let (name, qr) = (self.quota_names[q], &mut self.quotas[q]);
            let cost: f64 = placed.iter().map(|c| room.price(*c) * d.gpus_per_replica as f64).sum();
            let hourly = qr.used_hourly_usd + cost;
            if let Some(refused) = budget_refuses(d, name, qr, hourly, cost) {
                return refused;
            }
            qr.used_gpus += d.gpus();
            qr.used_hourly_usd = hourly;
        }
        let room = &mut self.pools[p];
        let mut taken = vec![0u32; room.nodes.len()];
        for i in used {
            room.nodes[i].free -= d.gpus_per_replica;
            taken[i] += d.gpus_per_replica;
        }
        self.took[p].add(d.priority, &d.address, &taken);
        Admission { address: d.address.clone(), placed: Some(placed), reason: None }
    }

    /// Why a job that does not fit on its pool waits: higher-priority jobs took the room,
    /// jobs of its own priority queued earlier did, or the pool never had it.
    fn why_not(&self, d: &Demand, p: usize, prefs: &[Capacity]) -> Admission {
        let room = &self.pools[p];
        let what = needs(d, prefs);
        // Would it fit if the higher-priority jobs had not taken anything?
        let (taken, higher) = self.took[p].higher_than(d.priority);
        if !higher.is_empty() {
            let mut without_higher = room.nodes.clone();
            for (n, g) in without_higher.iter_mut().zip(&taken) {
                n.free += g;
            }
            if fit(&without_higher, d, prefs).is_some() {
                let names: Vec<String> = higher.iter().map(|a| format!("`{a}`")).collect();
                return wait(
                    d,
                    WaitCode::Priority,
                    format!("{what}; higher-priority jobs took them ({})", names.join(", ")),
                );
            }
        }
        if fit(self.initial[p], d, prefs).is_some() {
            return wait(
                d,
                WaitCode::Capacity,
                format!("{what}; {} priority jobs queued earlier took them", priority_str(d.priority)),
            );
        }
        let free: u32 = room.nodes.iter().filter(|n| prefs.contains(&n.capacity)).map(|n| n.free).sum();
        wait(d, WaitCode::Capacity, format!("{what}; `{}` has {free} free on such nodes", d.pool))
    }
}

/// A quota that refuses the job before capacity is looked at: GPU model or `max_gpus`.
fn quota_refuses(d: &Demand, q: &Address, qr: &QuotaRoom, gpu: &str) -> Option<Admission> {
    if !qr.allowed_gpus.is_empty() && !qr.allowed_gpus.iter().any(|g| g == gpu) {
        return Some(wait(
            d,
            WaitCode::Quota,
            format!("`{q}` does not allow {gpu} GPUs (allowed: {})", qr.allowed_gpus.join(", ")),
        ));
    }
    if let Some(max) = qr.max_gpus
        && qr.used_gpus + d.gpus() > max
    {
        return Some(wait(
            d,
            WaitCode::Quota,
            format!("`{q}` allows {max} GPUs; {} are in use and this job needs {}", qr.used_gpus, d.gpus()),
        ));
    }
    None
}

/// A quota whose budget the job's placement would exceed (`hourly`: with the job).
fn budget_refuses(d: &Demand, q: &Address, qr: &QuotaRoom, hourly: f64, cost: f64) -> Option<Admission> {
    if let Some(limit) = qr.hourly_usd
        && hourly > limit + 1e-9
    {
        return Some(wait(
            d,
            WaitCode::Quota,
            format!(
                "`{q}` budget is {} USD/h; running jobs use {} and this one would add {}",
                usd(limit),
                usd(qr.used_hourly_usd),
                usd(cost)
            ),
        ));
    }
    if let Some(limit) = qr.monthly_usd
        && hourly * crate::cost::HOURS_PER_MONTH > limit + 1e-9
    {
        return Some(wait(
            d,
            WaitCode::Quota,
            format!(
                "`{q}` budget is {} USD/month; with this job its jobs would cost {} USD/month",
                usd(limit),
                usd(hourly * crate::cost::HOURS_PER_MONTH)
            ),
        ));
    }
    None
}

/// What the jobs admitted so far this round took from one pool's nodes, as running
/// totals: those of the priority levels finished (`below`) and of the level being
/// admitted (`current`). Admission goes through the levels in order, so "taken by
/// higher-priority jobs" is one of the two totals, never a re-scan of the admissions.
#[derive(Default)]
struct Took {
    level: Option<Priority>,
    below: Vec<u32>,
    /// The first three jobs of `below` that took something, in admission order.
    below_names: Vec<Address>,
    current: Vec<u32>,
    current_names: Vec<Address>,
}

/// Names of the higher-priority jobs a wait reason lists.
const NAMED_TAKERS: usize = 3;

impl Took {
    fn add(&mut self, priority: Priority, address: &Address, taken: &[u32]) {
        if self.level != Some(priority) {
            add_into(&mut self.below, &self.current);
            let names = std::mem::take(&mut self.current_names);
            self.below_names.extend(names);
            self.below_names.truncate(NAMED_TAKERS);
            self.current.iter_mut().for_each(|g| *g = 0);
            self.level = Some(priority);
        }
        add_into(&mut self.current, taken);
        if taken.iter().any(|g| *g > 0) && self.current_names.len() < NAMED_TAKERS {
            self.current_names.push(address.clone());
        }
    }

    /// GPUs per node taken by jobs of a higher priority than `priority`, and the first
    /// three of those jobs that took any.
    fn higher_than(&self, priority: Priority) -> (Vec<u32>, Vec<&Address>) {
        let mut taken = self.below.clone();
        let mut names: Vec<&Address> = self.below_names.iter().collect();
        if self.level.is_some_and(|l| l < priority) {
            add_into(&mut taken, &self.current);
            names.extend(&self.current_names);
            names.truncate(NAMED_TAKERS);
        }
        (taken, names)
    }
}

/// `into[i] += from[i]`, growing `into` to `from`'s length.
fn add_into(into: &mut Vec<u32>, from: &[u32]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

fn wait(d: &Demand, code: WaitCode, message: String) -> Admission {
    Admission { address: d.address.clone(), placed: None, reason: Some(WaitReason { code, message }) }
}

/// Capacity types a job may use, preferred first.
pub fn preferences(d: &Demand, fallback: Fallback) -> Vec<Capacity> {
    match (d.preemptible, fallback) {
        (true, Fallback::OnDemand) => vec![Capacity::Spot, Capacity::OnDemand],
        (true, _) => vec![Capacity::Spot],
        (false, _) => vec![Capacity::OnDemand],
    }
}

fn needs(d: &Demand, prefs: &[Capacity]) -> String {
    let on: Vec<&str> = prefs.iter().map(|c| c.as_str()).collect();
    let unit = if d.gpus_per_replica == 1 { "GPU" } else { "GPUs" };
    format!("needs {} × {} {unit} on {} nodes", d.replicas, d.gpus_per_replica, on.join(" or "))
}

/// Place every replica (best fit: the fullest node that still has room, preferred
/// capacity first). The node of each replica, or `None` unless all fit.
fn fit(nodes: &[NodeRoom], d: &Demand, prefs: &[Capacity]) -> Option<Vec<usize>> {
    let mut free: Vec<u32> = nodes.iter().map(|n| n.free).collect();
    let mut used = Vec::with_capacity(d.replicas as usize);
    for _ in 0..d.replicas {
        let slot = prefs.iter().find_map(|cap| {
            nodes
                .iter()
                .zip(&free)
                .enumerate()
                .filter(|(_, (n, f))| n.capacity.market() == *cap && **f >= d.gpus_per_replica)
                .min_by_key(|(i, (_, f))| (**f, *i))
                .map(|(i, _)| i)
        })?;
        free[slot] -= d.gpus_per_replica;
        used.push(slot);
    }
    Some(used)
}

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
