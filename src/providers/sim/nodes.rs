//! The node API calls: create (capacity, fallback, idempotency), paged list, batched
//! terminate. Each function is one API call as the cloud sees it: synchronous, under the
//! lock, after the caller slept the latency.

use std::collections::HashSet;

use super::catalog_check::{invalid, placeable};
use super::cloud::{Inner, SimCloud};
use super::rng::{self, Stream};
use super::world::{Change, SimNode, TokenRecord, end_nodes};
use crate::providers::{
    Capacity, CreateNodes, CreateResult, ErrorClass, JobState, ListFilter, Node, NodeState, ProviderError, TAG_LINEAGE,
    TAG_MANAGED,
};

/// Nodes per page of `list_nodes` and ids per internal `terminate_nodes` call.
pub const PAGE: usize = 1_000;

impl SimCloud {
    /// Count the call and draw its injected failure. Every API call starts here, under the
    /// lock and before it changes anything.
    pub(super) fn begin(&self, inner: &mut Inner, api: &str) -> Result<(), ProviderError> {
        let n = inner.calls;
        inner.calls += 1;
        *inner.stats.calls.entry(api.to_string()).or_default() += 1;
        if rng::chance(self.config.seed, Stream::CallFailure, n, self.config.failure_rate) {
            inner.stats.injected_failures += 1;
            return Err(ProviderError::new(
                ErrorClass::Retryable,
                "SimInternalError",
                format!("{api} failed: simulated internal error (failure rate {})", self.config.failure_rate),
            ));
        }
        Ok(())
    }

    pub(super) fn api_create(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, "create_nodes")?;
        if let Some(done) = inner.world.tokens.get(&req.token) {
            return Ok(repeat(&inner, &req.token, done));
        }
        if req.tags.get(TAG_MANAGED).is_none_or(|v| v != "true") {
            return Err(invalid(
                "SimMissingOwnershipTag",
                format!(
                    "create for `{}` lacks the tag {TAG_MANAGED}=true: gpuplan could never see or delete those nodes",
                    req.pool
                ),
            ));
        }
        let mut types = placeable(&req.region, &req.zone, &req.instance_types)?;
        check_hardware(req, &mut types)?;
        let reserved = super::reserved_room::narrow(&inner.world, req, &mut types)?;
        if let (Capacity::Spot, Some(max)) = (req.capacity, req.max_spot_price) {
            let cheapest =
                types.iter().map(|t| t.spot_price_usd(crate::catalog::DEFAULT_CNY_PER_USD)).fold(f64::MAX, f64::min);
            types.retain(|t| t.spot_price_usd(crate::catalog::DEFAULT_CNY_PER_USD) <= max);
            if types.is_empty() {
                return Err(invalid(
                    "SimSpotPriceTooLow",
                    format!(
                        "max_spot_price {max:.4} USD/h is below the spot price {cheapest:.4} USD/h in `{}`",
                        req.zone
                    ),
                ));
            }
        }
        let limit = inner.world.limit(&req.zone, req.capacity).unwrap_or_else(|| self.config.default_capacity());
        let (mut next, mut remaining, mut nodes) = (inner.world.counter, req.count, Vec::new());
        let launched_ms = inner.world.now_ms();
        // What a price and capacity trace still lets the region launch, per GPU model.
        let mut room: Vec<(String, u32, u64)> = Vec::new();
        for t in &types {
            if reserved.is_none()
                && !room.iter().any(|(g, ..)| *g == t.gpu)
                && let Some((n, since)) = super::trace::trace_room(&inner.world, &req.region, &t.gpu, req.capacity)
            {
                room.push((t.gpu.clone(), n, since));
            }
        }
        let mut traced: Option<(u32, u64)> = None;
        for t in &types {
            let mut free = reserved
                .unwrap_or_else(|| limit.saturating_sub(inner.world.live_count(&req.zone, req.capacity, &t.name)));
            if let Some(r) = room.iter_mut().find(|(g, ..)| *g == t.gpu) {
                free = free.min(r.1);
                r.1 -= free.min(remaining);
                traced = Some((r.1, r.2));
            }
            for _ in 0..free.min(remaining) {
                let id = inner.next_id("i-", self.config.seed, &mut next);
                nodes.push(SimNode {
                    id,
                    pool: Some(req.pool.clone()),
                    instance_type: t.name.clone(),
                    region: req.region.clone(),
                    zone: req.zone.clone(),
                    capacity: req.capacity,
                    state: NodeState::Running,
                    image: req.image.clone(),
                    tags: req.tags.clone(),
                    launched_ms,
                    ended_ms: None,
                    hardware: req.hardware.clone(),
                });
            }
            remaining -= free.min(remaining);
            if remaining == 0 {
                break;
            }
        }
        let mut errors = Vec::new();
        if remaining > 0 {
            errors.push(shortfall(req, &types, traced, nodes.len(), limit));
        }
        // A call that placed nothing leaves no token behind, so a retry after capacity frees
        // up can still succeed (as EC2 does for failed requests).
        if !nodes.is_empty() {
            let record = TokenRecord { ids: nodes.iter().map(|n| n.id.clone()).collect(), requested: req.count };
            inner.commit(vec![
                Change::Counter { next },
                Change::Nodes { nodes: nodes.clone() },
                Change::Token { token: req.token.clone(), record },
            ])?;
        }
        Ok(CreateResult { nodes: nodes.iter().map(SimNode::to_node).collect(), errors })
    }

    /// One page of `list_nodes`: managed nodes of the region (and lineage) with ids after
    /// `after`, in id order. Only the first page counts as a call and may fail.
    pub(super) fn api_list_page(
        &self,
        filter: &ListFilter,
        after: Option<&str>,
    ) -> Result<(Vec<Node>, Option<String>), ProviderError> {
        let mut inner = self.lock();
        if after.is_none() {
            self.begin(&mut inner, "list_nodes")?;
            super::catalog_check::check_region(&filter.region)?;
            // The trace's reclaims the clock passed happen before the cloud answers.
            inner.trace_reclaims().map_err(|e| invalid("SimTrace", e.to_string()))?;
        }
        inner.stats.pages += 1;
        let from = match after {
            Some(id) => std::ops::Bound::Excluded(id.to_string()),
            None => std::ops::Bound::Unbounded,
        };
        let page: Vec<Node> = inner
            .world
            .nodes
            .range((from, std::ops::Bound::Unbounded))
            .map(|(_, n)| n)
            .filter(|n| n.region == filter.region && n.is_managed())
            .filter(|n| filter.lineage.as_ref().is_none_or(|l| n.tags.get(TAG_LINEAGE) == Some(l)))
            .take(PAGE)
            .map(SimNode::to_node)
            .collect();
        let next = (page.len() == PAGE).then(|| page[PAGE - 1].id.clone());
        Ok((page, next))
    }

    /// Refuse the whole request if any id is a node gpuplan does not own or one in another
    /// region; checked before the first batch so that a bad id touches nothing.
    pub(super) fn check_terminate(&self, region: &str, ids: &[String]) -> Result<(), ProviderError> {
        check_owned(&self.lock(), region, ids)
    }

    /// One internal terminate call of at most [`PAGE`] ids.
    pub(super) fn api_terminate_batch(&self, region: &str, ids: &[String]) -> Result<(), ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, "terminate_nodes")?;
        // Checked again: another task may have changed the world since `check_terminate`.
        check_owned(&inner, region, ids)?;
        let changes = end_nodes(&inner.world, ids, NodeState::Terminated, JobState::Failed, "node terminated");
        inner.commit(changes)?;
        Ok(())
    }
}

fn check_owned(inner: &Inner, region: &str, ids: &[String]) -> Result<(), ProviderError> {
    for id in ids {
        let Some(n) = inner.world.nodes.get(id) else { continue };
        if !n.is_managed() {
            return Err(invalid(
                "SimUnmanagedNode",
                format!(
                    "refusing to terminate `{id}`: it lacks the tag {TAG_MANAGED}=true, so gpuplan does not own it"
                ),
            ));
        }
        if n.region != region {
            return Err(invalid(
                "SimWrongRegion",
                format!("node `{id}` is in region `{}`, not `{region}`; nothing was terminated", n.region),
            ));
        }
    }
    Ok(())
}

/// The answer to a repeated token: the nodes that call created, nothing new.
fn repeat(inner: &Inner, token: &str, done: &TokenRecord) -> CreateResult {
    let nodes: Vec<Node> = done.ids.iter().filter_map(|id| inner.world.nodes.get(id)).map(SimNode::to_node).collect();
    let mut errors = Vec::new();
    if done.ids.len() < done.requested as usize {
        errors.push(ProviderError::new(
            ErrorClass::OutOfCapacity,
            "SimInsufficientCapacity",
            format!(
                "token `{token}` was used before: that call placed {} of {} nodes and this one creates none",
                done.ids.len(),
                done.requested
            ),
        ));
    }
    CreateResult { nodes, errors }
}

/// Why a create placed fewer nodes than it asked: the reservation is full, the trace
/// has no room, or the zone's limit.
fn shortfall(
    req: &CreateNodes,
    types: &[&crate::catalog::InstanceType],
    traced: Option<(u32, u64)>,
    placed: usize,
    limit: u32,
) -> ProviderError {
    let names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
    match (traced, &req.reservation) {
        (_, Some(t)) => super::reserved_room::reservation_full(req, &t.id, placed),
        (Some((0, since)), None) => trace_out_of_capacity(req, placed, since),
        _ => out_of_capacity(req, &names.join(", "), placed, limit),
    }
}

fn out_of_capacity(req: &CreateNodes, types: &str, placed: usize, limit: u32) -> ProviderError {
    ProviderError::new(
        ErrorClass::OutOfCapacity,
        "SimInsufficientCapacity",
        format!(
            "insufficient {} capacity in zone `{}` for {types}: placed {placed} of {} nodes (limit {limit} live nodes per instance type)",
            req.capacity, req.zone, req.count
        ),
    )
}

fn trace_out_of_capacity(req: &CreateNodes, placed: usize, since_ms: u64) -> ProviderError {
    ProviderError::new(
        ErrorClass::OutOfCapacity,
        "SimInsufficientCapacity",
        format!(
            "insufficient {} capacity in region `{}`: placed {placed} of {} nodes (the trace allows no more since {})",
            req.capacity,
            req.region,
            req.count,
            crate::model::time::rfc3339_ms(since_ms)
        ),
    )
}

/// `ids` without repeats, first occurrence kept.
pub fn dedup(ids: &[String]) -> Vec<String> {
    let mut seen = HashSet::new();
    ids.iter().filter(|id| seen.insert(id.as_str())).cloned().collect()
}

/// The sim cloud checks disks and fabrics as the clouds do: a disk type no cloud sells,
/// or a fabric none of the batch's instance types has, launches nothing; with a fabric,
/// only the types that have it are tried.
fn check_hardware(req: &CreateNodes, types: &mut Vec<&crate::catalog::InstanceType>) -> Result<(), ProviderError> {
    let Some(h) = &req.hardware else { return Ok(()) };
    let sold = |kind: &str| crate::catalog::hardware::DISK_TYPES.iter().any(|t| t.name == kind);
    if let Some(d) = h.disks.as_ref().and_then(|d| d.all().find(|d| !sold(&d.kind))) {
        return Err(invalid("SimInvalidDiskType", format!("no cloud sells disk type `{}`", d.kind)));
    }
    if let Some(f) = h.fabric {
        types.retain(|t| crate::catalog::hardware::fabric_of(&t.name).is_some_and(|(have, _)| have == f));
        if types.is_empty() {
            return Err(invalid(
                "SimFabricUnsupported",
                format!("none of {} has fabric `{f}`", req.instance_types.join(", ")),
            ));
        }
    }
    Ok(())
}
