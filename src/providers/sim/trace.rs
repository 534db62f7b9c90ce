//! Price and capacity traces (`gpuplan sim trace FILE`): the sim cloud's prices and spot
//! capacity moving by the hour, as real clouds' do, so that floating pools are tested and
//! benchmarked without credentials (docs/design/floating-pools.md).
//!
//! A trace is a CSV `time,provider,region,gpu,capacity,price_usd_hour,available_nodes`. As
//! the sim clock passes a row, its price (per GPU-hour) and capacity hold for sim nodes of
//! that GPU in that region: offers report the price as live, creates launch at most
//! `available_nodes` more nodes than ran when the row began, and `0` spot reclaims the
//! spot nodes running there.

use super::catalog_check::check_region;
use super::error::SimError;
use super::world::{Change, TraceRow, World, end_nodes};
use crate::catalog::catalog;
use crate::providers::{Capacity, JobState, NodeState, Offer};
use crate::spec::model::ProviderKind;

/// The header a trace file starts with.
pub const HEADER: &str = "time,provider,region,gpu,capacity,price_usd_hour,available_nodes";

/// Parse a trace; every bad line is reported with its number, all in one error.
pub fn parse(text: &str) -> Result<Vec<TraceRow>, SimError> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let Some((_, header)) = lines.next() else {
        return Err(SimError::Invalid(format!("the trace is empty: it starts with the header `{HEADER}`")));
    };
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    if cols != HEADER.split(',').collect::<Vec<_>>() {
        return Err(SimError::Invalid(format!("line 1: the header must be `{HEADER}`, found `{}`", header.trim())));
    }
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in lines {
        match row(line) {
            Ok(r) => rows.push(r),
            Err(e) => errors.push(format!("line {}: {e}", i + 1)),
        }
    }
    if !errors.is_empty() {
        return Err(SimError::Invalid(errors.join("\n")));
    }
    rows.sort_by_key(|r| r.at_ms);
    Ok(rows)
}

fn row(line: &str) -> Result<TraceRow, String> {
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    if f.len() != 7 {
        return Err(format!("expected 7 columns ({HEADER}), found {}", f.len()));
    }
    let at = humantime::parse_rfc3339_weak(f[0]).map_err(|_| format!("`{}` is not an RFC 3339 time", f[0]))?;
    let at_ms = at.duration_since(std::time::UNIX_EPOCH).map_err(|_| format!("`{}` is before 1970", f[0]))?;
    if f[1] != "sim" {
        return Err(format!("provider `{}`: a trace drives the sim cloud only (`sim`)", f[1]));
    }
    check_region(f[2]).map_err(|e| e.message)?;
    let gpu = catalog().gpu_model(f[3]).map(|m| m.name.to_string()).ok_or(format!("unknown GPU model `{}`", f[3]))?;
    let capacity = match f[4] {
        "spot" => Capacity::Spot,
        "on-demand" | "on_demand" => Capacity::OnDemand,
        other => return Err(format!("capacity `{other}` is neither `spot` nor `on-demand`")),
    };
    let price = f[5].parse::<f64>().ok().filter(|p| p.is_finite() && *p >= 0.0);
    let price = price.ok_or(format!("price_usd_hour `{}` is not a price", f[5]))?;
    let available_nodes = match f[6] {
        "" => None,
        n => Some(n.parse::<u32>().map_err(|_| format!("available_nodes `{n}` is not a count (or empty)"))?),
    };
    Ok(TraceRow {
        at_ms: u64::try_from(at_ms.as_millis()).unwrap_or(u64::MAX),
        region: f[2].to_string(),
        gpu,
        capacity,
        price_usd_gpu_hour: price,
        available_nodes,
    })
}

/// The changes that reclaim the spot nodes of every trace row with `available_nodes = 0`
/// that the sim clock passed since the last reclaim, ending with [`Change::TraceDone`] (a
/// fact once done); `None` when no row was passed, and nothing is to be recorded.
pub(super) fn reclaims_due(world: &World) -> Option<Vec<Change>> {
    if world.trace.is_empty() {
        return None;
    }
    let now = world.now_ms();
    let due: Vec<&TraceRow> = world
        .trace
        .iter()
        .filter(|r| r.at_ms > world.trace_done_ms && r.at_ms <= now)
        .filter(|r| r.capacity == Capacity::Spot && r.available_nodes == Some(0))
        .collect();
    if world.trace.iter().all(|r| r.at_ms <= world.trace_done_ms || r.at_ms > now) {
        return None;
    }
    let mut ids = Vec::new();
    for r in &due {
        ids.extend(
            world
                .nodes
                .values()
                .filter(|n| n.is_live() && n.is_managed() && n.capacity == Capacity::Spot && n.region == r.region)
                .filter(|n| gpu_of(&n.instance_type) == Some(r.gpu.as_str()))
                .map(|n| n.id.clone()),
        );
    }
    ids.sort();
    ids.dedup();
    let why = "node reclaimed (spot): the trace leaves no spot capacity in its region";
    let mut changes = end_nodes(world, &ids, NodeState::Reclaimed, JobState::Preempted, why);
    changes.push(Change::TraceDone { ms: now });
    Some(changes)
}

/// The GPU model of a sim instance type.
pub(super) fn gpu_of(instance_type: &str) -> Option<&'static str> {
    catalog().instance_type(ProviderKind::Sim, instance_type).map(|t| t.gpu.as_str())
}

/// How many more nodes of `gpu` on `capacity` the trace lets `region` launch now; `None`:
/// no limit (no row, or an empty `available_nodes`). Counted against the nodes launched
/// there since the row began.
pub(super) fn trace_room(world: &World, region: &str, gpu: &str, capacity: Capacity) -> Option<(u32, u64)> {
    let now = world.now_ms();
    let row = world.trace_row(region, gpu, capacity, now)?;
    let allowed = row.available_nodes?;
    let launched = world
        .nodes
        .values()
        .filter(|n| n.is_live() && n.region == region && n.capacity == capacity && n.launched_ms >= row.at_ms)
        .filter(|n| gpu_of(&n.instance_type) == Some(gpu))
        .count() as u32;
    Some((allowed.saturating_sub(launched), row.at_ms))
}

/// Live offers from the trace in force now: each sim instance type of the row's GPU in its
/// region, at the row's price per GPU-hour times the type's GPUs.
pub(super) fn trace_offers(world: &World, gpu: &str, region: Option<&str>) -> Vec<Offer> {
    let now = world.now_ms();
    let mut out = Vec::new();
    let mut seen: Vec<(String, Capacity)> = Vec::new();
    for r in world.trace.iter().rev().filter(|r| r.at_ms <= now && r.gpu == gpu) {
        if region.is_some_and(|x| x != r.region) || seen.contains(&(r.region.clone(), r.capacity)) {
            continue;
        }
        seen.push((r.region.clone(), r.capacity));
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(r.at_ms);
        let as_of = humantime::format_rfc3339_seconds(at).to_string();
        for t in catalog().instance_types(ProviderKind::Sim).into_iter().filter(|t| t.gpu == gpu) {
            if !t.offered_in(&r.region) {
                continue;
            }
            out.push(Offer {
                provider: ProviderKind::Sim,
                instance_type: t.name.clone(),
                gpu: t.gpu.clone(),
                gpus: t.gpus,
                region: r.region.clone(),
                zones: vec![],
                capacity: r.capacity,
                price_usd: r.price_usd_gpu_hour * t.gpus as f64,
                live_price: true,
                as_of: as_of.clone(),
            });
        }
    }
    out
}
