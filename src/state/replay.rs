//! Journal entries and their meaning: [`JournalEntry`], [`apply_entry`] (one entry, pure)
//! and [`Replay`] (many entries in linear time, same result).
//!
//! Semantics, decided once here:
//! - `PutResource` replaces kind, provider, provider_kind, region, config and dependencies.
//!   It keeps the resource's existing nodes unless the entry carries nodes, which then
//!   replace them (deduplicated by id). A floating pool put in another provider block
//!   than before keeps its nodes where they live: those that record no provider block
//!   get the old one. Executors record nodes with `AddNodes` as they
//!   appear, so a later `PutResource` with no nodes must not forget them. Likewise a
//!   job's record (`job`) is kept unless the entry carries one.
//! - `AddNodes` adds nodes by id: a node whose id is already present replaces it in place
//!   (a newer observation), others are appended in order. On an address the state does not
//!   know it creates a bare resource (kind from the address, null config): a node that
//!   exists in a cloud is never dropped from state just because the entries came out of order.
//! - `RemoveNodes` removes nodes by id; unknown ids and addresses are ignored.
//! - `DeleteResource` removes the resource; unknown addresses are ignored.
//! - `History` appends, keeping the newest [`HISTORY_LIMIT`] entries and counting the
//!   older ones (`compact::cap_history`).
//! - `Autoscale` sets the pool's last autoscaler action (see `State::autoscale`).
//! - `Outputs` sets and removes output values by name (see `State::outputs`).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::model::{HISTORY_LIMIT, HistoryEntry, ResourceState, ScaleRecord, State};
use crate::model::Node;

/// One finished operation, as one line of the journal. `PutResource` holds its resource
/// inline: a journal holds few entries at a time, and each is written and dropped.
#[allow(clippy::large_enum_variant)]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum JournalEntry {
    PutResource {
        address: String,
        resource: ResourceState,
    },
    AddNodes {
        address: String,
        nodes: Vec<Node>,
    },
    RemoveNodes {
        address: String,
        ids: Vec<String>,
    },
    DeleteResource {
        address: String,
    },
    History {
        entry: HistoryEntry,
    },
    Autoscale {
        pool: String,
        record: ScaleRecord,
    },
    /// Spend ledger lines opened for nodes launched or adopted (an id already open is kept).
    SpendOpen {
        entries: Vec<(String, crate::state::model::SpendEntry)>,
    },
    /// Spend ledger lines closed: the nodes ended at `at_ms` (provider clock).
    SpendClose {
        ids: Vec<String>,
        at_ms: u64,
    },
    /// A resource renamed (`moved {}`, `state mv`): its nodes, their address tags, its
    /// autoscaler record and its spend lines follow. Nothing happens when `from` is
    /// unknown or `to` is taken.
    Move {
        from: String,
        to: String,
    },
    /// The outputs a successful apply leaves: `set` replaces those values by name,
    /// `remove` drops names.
    Outputs {
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        set: BTreeMap<String, crate::state::model::OutputState>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        remove: Vec<String>,
    },
    /// Nodes of `pool` replaced for their GPU health at these times (ms, provider clock);
    /// repairs older than an hour before the newest are forgotten.
    Repairs {
        pool: String,
        at_ms: Vec<u64>,
    },
    /// The GPU faults a plan read: `set` replaces a node's, `remove` forgets nodes that
    /// read healthy or are gone.
    Health {
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        set: BTreeMap<String, Vec<crate::model::health::Finding>>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        remove: Vec<String>,
    },
}

impl JournalEntry {
    /// The resource (or autoscaled pool) address the entry is about, if any.
    pub fn address(&self) -> Option<&str> {
        match self {
            JournalEntry::PutResource { address, .. }
            | JournalEntry::AddNodes { address, .. }
            | JournalEntry::RemoveNodes { address, .. }
            | JournalEntry::DeleteResource { address }
            | JournalEntry::Move { to: address, .. } => Some(address),
            JournalEntry::Autoscale { pool, .. } | JournalEntry::Repairs { pool, .. } => Some(pool),
            JournalEntry::History { .. }
            | JournalEntry::SpendOpen { .. }
            | JournalEntry::SpendClose { .. }
            | JournalEntry::Outputs { .. }
            | JournalEntry::Health { .. } => None,
        }
    }
}

/// Apply one entry to `state`. Pure: no I/O, no clock. Costs O(nodes of that resource),
/// so use [`Replay`] for long sequences.
pub fn apply_entry(state: &mut State, entry: &JournalEntry) {
    match entry {
        JournalEntry::PutResource { address, resource } => match state.resources.get_mut(address) {
            Some(existing) => {
                let mut nodes = if resource.nodes.is_empty() {
                    std::mem::take(&mut existing.nodes)
                } else {
                    dedup_nodes(&resource.nodes)
                };
                keep_provider(nodes.iter_mut(), existing.provider.as_deref(), resource);
                // Like nodes, a job's record survives a configuration update without one.
                let job = resource.job.clone().or_else(|| existing.job.take());
                *existing = ResourceState { nodes, job, ..resource.clone() };
            }
            None => {
                let nodes = dedup_nodes(&resource.nodes);
                state.resources.insert(address.clone(), ResourceState { nodes, ..resource.clone() });
            }
        },
        JournalEntry::AddNodes { address, nodes } => {
            let resource = state.resources.entry(address.clone()).or_insert_with(|| bare_resource(address));
            for node in nodes {
                match resource.nodes.iter_mut().find(|n| n.id == node.id) {
                    Some(slot) => *slot = node.clone(),
                    None => resource.nodes.push(node.clone()),
                }
            }
        }
        JournalEntry::RemoveNodes { address, ids } => {
            if let Some(resource) = state.resources.get_mut(address) {
                resource.nodes.retain(|n| !ids.contains(&n.id));
            }
        }
        JournalEntry::DeleteResource { address } => {
            state.resources.remove(address);
        }
        JournalEntry::History { entry } => {
            state.history.push(entry.clone());
            super::compact::cap_history(&mut state.history, &mut state.history_summary);
        }
        JournalEntry::Autoscale { pool, record } => {
            state.autoscale.insert(pool.clone(), record.clone());
        }
        JournalEntry::SpendOpen { entries } => open_spend(&mut state.spend, entries.iter().cloned()),
        JournalEntry::SpendClose { ids, at_ms } => close_spend(&mut state.spend, ids, *at_ms),
        JournalEntry::Move { from, to } => {
            move_resource(state, from, to);
        }
        JournalEntry::Outputs { set, remove } => set_outputs(state, set.clone(), remove),
        JournalEntry::Repairs { pool, at_ms } => add_repairs(state, pool, at_ms),
        JournalEntry::Health { set, remove } => set_health(state, set.clone(), remove),
    }
}

/// Apply a [`JournalEntry::Outputs`].
fn set_outputs(state: &mut State, set: BTreeMap<String, crate::state::model::OutputState>, remove: &[String]) {
    for name in remove {
        state.outputs.remove(name);
    }
    state.outputs.extend(set);
}

/// Rename resource `from` to `to` (see [`JournalEntry::Move`]); whether it moved.
pub fn move_resource(state: &mut State, from: &str, to: &str) -> bool {
    if state.resources.contains_key(to) {
        return false;
    }
    let Some(mut resource) = state.resources.remove(from) else { return false };
    // `to` comes from a move the plan validated as an address; should a journal written
    // by hand hold one that does not parse, the nodes keep their pool and only their tag
    // follows, rather than failing the whole replay.
    let pool: Option<crate::addr::Address> = to.parse().ok();
    for n in &mut resource.nodes {
        if let Some(p) = &pool {
            n.pool = p.clone();
        }
        if n.tags.contains_key(crate::model::node::TAG_ADDRESS) {
            n.tags.insert(crate::model::node::TAG_ADDRESS, to);
        }
    }
    state.resources.insert(to.to_string(), resource);
    if let Some(record) = state.autoscale.remove(from) {
        state.autoscale.insert(to.to_string(), record);
    }
    for line in state.spend.values_mut().filter(|l| l.pool == from) {
        line.pool = to.to_string();
    }
    true
}

/// Open ledger lines; a node already open keeps its line (an adopted node re-recorded, a
/// replayed journal), a closed one that is seen again reopens from now.
fn open_spend(
    spend: &mut BTreeMap<String, crate::state::model::SpendEntry>,
    entries: impl Iterator<Item = (String, crate::state::model::SpendEntry)>,
) {
    for (id, entry) in entries {
        match spend.get(&id) {
            Some(open) if open.end_ms.is_none() => {}
            _ => {
                spend.insert(id, entry);
            }
        }
    }
}

/// Close the open lines of `ids` at `at_ms` (never before they started).
fn close_spend(spend: &mut BTreeMap<String, crate::state::model::SpendEntry>, ids: &[String], at_ms: u64) {
    for id in ids {
        if let Some(e) = spend.get_mut(id)
            && e.end_ms.is_none()
        {
            e.end_ms = Some(at_ms.max(e.start_ms));
        }
    }
}

/// A state with entries folded in, indexing node ids of every resource it touched so each
/// entry costs O(its own size): replaying N entries is O(N), not O(N × nodes).
#[derive(Debug)]
pub struct Replay {
    state: State,
    /// Nodes of touched resources, taken out of `state` until [`Replay::finish`]. Removed
    /// nodes leave a `None` so positions (and so node order) stay stable.
    touched: HashMap<String, Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    nodes: Vec<Option<Node>>,
    /// Positions of the present nodes by id, once the resource has held more than
    /// [`INDEX_FROM`] nodes; below that a scan is cheaper, and 100,000 one-node pools
    /// would otherwise carry 100,000 maps (about 30 MB). Boxed: every touched resource
    /// has a `Slots`, few have the map.
    #[allow(clippy::box_collection)]
    by_id: Option<Box<HashMap<String, usize>>>,
    /// Nodes present (not removed).
    present: usize,
}

/// Slots (present or removed) above which a resource's nodes are indexed by id.
const INDEX_FROM: usize = 16;

impl Slots {
    fn from_nodes(nodes: Vec<Node>) -> Slots {
        let mut slots = Slots::default();
        slots.add(nodes);
        slots
    }
    /// Where the present node `id` is.
    fn position(&self, id: &str) -> Option<usize> {
        match &self.by_id {
            Some(by_id) => by_id.get(id).copied(),
            None => self.nodes.iter().position(|n| n.as_ref().is_some_and(|n| n.id == id)),
        }
    }
    fn add(&mut self, nodes: impl IntoIterator<Item = Node>) {
        let nodes = nodes.into_iter();
        // Exact: a first push would reserve four slots for what is usually one node, for
        // every resource an apply touches.
        self.nodes.reserve_exact(nodes.size_hint().0);
        for node in nodes {
            match self.position(&node.id) {
                Some(at) => self.nodes[at] = Some(node),
                None => {
                    if let Some(by_id) = &mut self.by_id {
                        by_id.insert(node.id.clone(), self.nodes.len());
                    }
                    self.nodes.push(Some(node));
                    self.present += 1;
                    self.index_when_large();
                }
            }
        }
    }
    fn index_when_large(&mut self) {
        if self.by_id.is_none() && self.nodes.len() > INDEX_FROM {
            let present = self.nodes.iter().enumerate().filter_map(|(i, n)| n.as_ref().map(|n| (n.id.clone(), i)));
            self.by_id = Some(Box::new(present.collect()));
        }
    }
    fn remove(&mut self, ids: &[String]) {
        for id in ids {
            if let Some(at) = self.position(id) {
                if let Some(by_id) = &mut self.by_id {
                    by_id.remove(id);
                }
                self.nodes[at] = None;
                self.present -= 1;
            }
        }
    }
    fn into_nodes(self) -> Vec<Node> {
        // Sized up front: collected from `flatten` (no lower bound), a one-node pool
        // would get room for four.
        let mut nodes = Vec::with_capacity(self.present);
        nodes.extend(self.nodes.into_iter().flatten());
        nodes
    }
}

impl Replay {
    pub fn new(base: State) -> Self {
        Replay { state: base, touched: HashMap::new() }
    }

    /// The lineage and serial of the base: entries never change them.
    pub fn lineage(&self) -> &str {
        &self.state.lineage
    }
    pub fn serial(&self) -> u64 {
        self.state.serial
    }

    pub fn apply(&mut self, entry: &JournalEntry) {
        self.apply_owned(entry.clone());
    }

    /// [`apply`](Self::apply) for an entry the caller no longer needs: its configuration
    /// and nodes move into the state instead of being copied.
    pub fn apply_owned(&mut self, entry: JournalEntry) {
        match entry {
            JournalEntry::PutResource { address, mut resource } => {
                let nodes = std::mem::take(&mut resource.nodes);
                let slots = if !nodes.is_empty() {
                    Slots::from_nodes(nodes)
                } else if let Some(slots) = self.touched.remove(&address) {
                    slots
                } else if let Some(old) = self.state.resources.get_mut(&address) {
                    Slots::from_nodes(std::mem::take(&mut old.nodes))
                } else {
                    Slots::default()
                };
                if resource.job.is_none() {
                    resource.job = self.state.resources.get_mut(&address).and_then(|old| old.job.take());
                }
                let mut slots = slots;
                let old = self.state.resources.get(&address).and_then(|r| r.provider.as_deref());
                keep_provider(slots.nodes.iter_mut().flatten(), old, &resource);
                self.state.resources.insert(address.clone(), resource);
                self.touched.insert(address, slots);
            }
            JournalEntry::AddNodes { address, nodes } => {
                if let Some(slots) = self.slots(&address, true) {
                    slots.add(nodes);
                }
            }
            JournalEntry::RemoveNodes { address, ids } => {
                if let Some(slots) = self.slots(&address, false) {
                    slots.remove(&ids);
                }
            }
            JournalEntry::DeleteResource { address } => {
                self.state.resources.remove(&address);
                self.touched.remove(&address);
            }
            // Capped once in `finish`: keeping the newest N is the same at the end as at each step.
            JournalEntry::History { entry } => self.state.history.push(entry),
            JournalEntry::Autoscale { pool, record } => {
                self.state.autoscale.insert(pool, record);
            }
            JournalEntry::SpendOpen { entries } => open_spend(&mut self.state.spend, entries.into_iter()),
            JournalEntry::SpendClose { ids, at_ms } => close_spend(&mut self.state.spend, &ids, at_ms),
            JournalEntry::Move { from, to } => {
                // Put the indexed nodes back first, so the move carries them.
                if let Some(slots) = self.touched.remove(&from)
                    && let Some(resource) = self.state.resources.get_mut(&from)
                {
                    resource.nodes = slots.into_nodes();
                }
                move_resource(&mut self.state, &from, &to);
            }
            JournalEntry::Outputs { set, remove } => set_outputs(&mut self.state, set, &remove),
            JournalEntry::Repairs { pool, at_ms } => add_repairs(&mut self.state, &pool, &at_ms),
            JournalEntry::Health { set, remove } => set_health(&mut self.state, set, &remove),
        }
    }

    /// The indexed nodes of `address`, taking them out of the state on first touch.
    fn slots(&mut self, address: &str, create: bool) -> Option<&mut Slots> {
        if !self.touched.contains_key(address) {
            let nodes = match self.state.resources.get_mut(address) {
                Some(resource) => std::mem::take(&mut resource.nodes),
                None if create => {
                    self.state.resources.insert(address.to_string(), bare_resource(address));
                    Vec::new()
                }
                None => return None,
            };
            self.touched.insert(address.to_string(), Slots::from_nodes(nodes));
        }
        self.touched.get_mut(address)
    }

    /// A copy of the state as [`finish`](Self::finish) would return it, leaving the replay
    /// going (a remote apply's periodic write).
    pub fn snapshot(&self) -> State {
        let mut state = self.state.clone();
        for (address, slots) in &self.touched {
            if let Some(resource) = state.resources.get_mut(address) {
                resource.nodes = slots.nodes.iter().flatten().cloned().collect();
            }
        }
        super::compact::cap_history(&mut state.history, &mut state.history_summary);
        state
    }

    /// After the state was written with a new serial, later writes build on that one.
    pub(crate) fn set_serial(&mut self, serial: u64) {
        self.state.serial = serial;
    }

    pub fn finish(mut self) -> State {
        for (address, slots) in self.touched {
            if let Some(resource) = self.state.resources.get_mut(&address) {
                resource.nodes = slots.into_nodes();
            }
        }
        super::compact::cap_history(&mut self.state.history, &mut self.state.history_summary);
        super::compact::fold_spend(&mut self.state);
        // Packed: inserted one by one, a map's nodes stay about half full.
        self.state.resources = std::mem::take(&mut self.state.resources).into_iter().collect();
        self.state
    }
}

/// A floating pool recorded in another provider block than before (a move across provider
/// blocks): its nodes that record no provider block live in the old one, and now say so.
fn keep_provider<'a>(nodes: impl Iterator<Item = &'a mut Node>, old: Option<&str>, new: &ResourceState) {
    let Some(old) = old.filter(|o| new.placement.is_some() && new.provider.as_deref() != Some(*o)) else {
        return;
    };
    for n in nodes.filter(|n| n.provider.is_none()) {
        n.provider = Some(old.to_string());
    }
}

fn dedup_nodes(nodes: &[Node]) -> Vec<Node> {
    Slots::from_nodes(nodes.to_vec()).into_nodes()
}

fn bare_resource(address: &str) -> ResourceState {
    let kind = address.split_once('.').map_or(address, |(kind, _)| kind);
    ResourceState {
        kind: kind.to_string(),
        provider: None,
        provider_kind: None,
        region: None,
        config: crate::json_text::JsonText::null(),
        sensitive: Vec::new(),
        dependencies: Vec::new(),
        nodes: Vec::new(),
        job: None,
        fallback: None,
        placement: None,
        reservation: None,
    }
}

/// Whether `after` is `before` with one or more lines added at its end, kept to the newest
/// [`HISTORY_LIMIT`] as every write keeps them: what a compaction that wrote history lines
/// the journal never held leaves (see `Journal::fold_unwritten`).
pub(crate) fn history_extends(before: &[HistoryEntry], after: &[HistoryEntry]) -> bool {
    let n = after.len();
    (1..=n).any(|added| {
        let kept = n - added;
        kept <= before.len()
            && n == (before.len() + added).min(HISTORY_LIMIT)
            && after[..kept] == before[before.len() - kept..]
    })
}

/// Record repairs of `pool`, keeping the last hour's (before the newest).
/// Apply a [`JournalEntry::Health`].
fn set_health(state: &mut State, set: BTreeMap<String, Vec<crate::model::health::Finding>>, remove: &[String]) {
    for id in remove {
        state.health.remove(id);
    }
    state.health.extend(set);
}

fn add_repairs(state: &mut State, pool: &str, at_ms: &[u64]) {
    let times = state.repairs.entry(pool.to_string()).or_default();
    times.extend_from_slice(at_ms);
    let newest = times.iter().copied().max().unwrap_or(0);
    times.retain(|&t| newest.saturating_sub(t) < super::model::REPAIR_WINDOW_MS);
    times.sort_unstable();
}
