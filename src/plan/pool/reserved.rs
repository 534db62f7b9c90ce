//! A pool's reserved capacity in one plan (docs/design/big-runs.md, `capacity {}`): the
//! reservation its first nodes launch into ([`reserved_use`]: bought, its window open,
//! with room the other pools leave), the batch that launches into it ([`split_creates`]),
//! and the reservations whose nodes must go: a Capacity Block within
//! [`WINDOW_MARGIN_MS`] of its end, or one that has ended (an On-Demand reservation's
//! instances outlive it as plain on-demand ones). Those nodes are replaced per
//! `mix`, so their jobs are stopped as under any removed node, before the cloud takes the
//! capacity back. Pure: the reservations come from the state, the time from the clocks.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use super::PoolCtx;
use crate::addr::{Address, Kind};
use crate::hex::hex;
use crate::model::reservation::{ReservationKind, ReservationTarget, Reserved, minute};
use crate::plan::model::PlanNote;
use crate::plan::shape::{PoolShape, ReservedUse};
use crate::providers::{Capacity, CreateNodes, Node, TAG_RESERVATION};
use crate::spec::model::GpuPool;
use crate::state::ResourceState;

/// How long before a reservation's window ends its nodes are replaced: 30 minutes.
pub(crate) const WINDOW_MARGIN_MS: u64 = 30 * 60_000;

/// The pool's shape ([`crate::plan::shape::shape`]) with its reserved capacity in this
/// plan ([`reserved_use`]), and a note when `capacity {}` cannot be used yet.
pub(crate) fn shape(
    cx: &PoolCtx<'_, '_>,
    pool: &GpuPool,
    cat: &crate::catalog::Catalog,
    notes: &mut Vec<PlanNote>,
) -> Option<PoolShape> {
    let mut shape = crate::plan::shape::shape(cx.input.spec, pool, cat)?;
    let (reserved, waits) = reserved_use(cx, &shape, pool);
    shape.reserved = reserved;
    notes.extend(waits.map(|message| PlanNote { address: cx.addr.clone(), message }));
    Some(shape)
}

/// The reservation `pool` launches into and the ones whose nodes go, with a note when
/// `capacity {}` names one that cannot take nodes yet; `None` for a pool with neither.
pub(crate) fn reserved_use(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    pool: &GpuPool,
) -> (Option<Box<ReservedUse>>, Option<String>) {
    let cap = pool.capacity.as_deref();
    let tagged: BTreeSet<&str> = cx.live.iter().filter_map(|n| n.tags.get(TAG_RESERVATION)).collect();
    if cap.is_none() && tagged.is_empty() {
        return (None, None);
    }
    let now = cx.input.clocks.get(&shape.provider).copied();
    let held = held(cx);
    let mut out = ReservedUse::default();
    for id in tagged {
        if let Some((addr, _, r)) = held.iter().find(|(_, _, r)| r.id == id)
            && let Some(why) = ending(addr, r, now)
        {
            out.ending.push((id.to_string(), why));
        }
    }
    let mut note = None;
    if let Some(cap) = cap {
        let target = cap.target();
        let fits = |(addr, rs, r): &&(Address, &ResourceState, &Reserved)| match &target {
            Some(t) => addr == t,
            None => {
                r.kind == ReservationKind::OnDemand
                    && rs.provider.as_deref() == Some(shape.provider.as_str())
                    && rs.region.as_deref() == Some(shape.region.as_str())
                    && shape.instance_types.contains(&r.instance_type)
                    && shape.zones.contains(&r.zone)
            }
        };
        let usable = held.iter().filter(fits).find(|(_, _, r)| usable(r, now) && free(cx, &r.id, r.count) > 0);
        match usable {
            Some((addr, _, r)) => {
                out.into = Some(ReservationTarget { id: r.id.clone(), kind: r.kind, address: addr.to_string() });
                out.zone = r.zone.clone();
                out.instance_type = r.instance_type.clone();
                out.slots = free(cx, &r.id, r.count);
            }
            None => {
                let what = target.map_or_else(|| "an open reservation that matches".to_string(), |t| format!("`{t}`"));
                note = Some(format!(
                    "its first nodes launch into {what} once it is bought, its window open and it has room; until then all follow `mix`"
                ));
            }
        }
    }
    let any = out.into.is_some() || !out.ending.is_empty();
    (any.then(|| Box::new(out)), note)
}

/// Every reservation the state holds: its address, record and purchase.
fn held<'s>(cx: &PoolCtx<'_, 's>) -> Vec<(Address, &'s ResourceState, &'s Reserved)> {
    cx.input
        .state
        .resources
        .iter()
        .filter(|(_, r)| r.kind == Kind::Reservation.as_str())
        // State keys are addresses gpuplan wrote; a reservation resource without a bought
        // record has nothing to launch into yet (its plan buys it first).
        .filter_map(|(k, rs)| Some((k.parse().ok()?, rs, rs.reservation.as_deref()?)))
        .collect()
}

/// Can the reservation take nodes now? Live, its window open and not within
/// [`WINDOW_MARGIN_MS`] of its end. Without a clock (a plan that did not refresh) the
/// record's state decides.
fn usable(r: &Reserved, now: Option<u64>) -> bool {
    if !r.is_live() {
        return false;
    }
    match now {
        Some(now) => now >= r.start_ms && r.end_ms.is_none_or(|end| now + WINDOW_MARGIN_MS < end),
        None => r.state == "active",
    }
}

/// Why the nodes in reservation `r` go now, if they do: only a Capacity Block's (the
/// instances of an On-Demand reservation that ends run on as plain on-demand ones).
fn ending(addr: &Address, r: &Reserved, now: Option<u64>) -> Option<String> {
    if r.kind != ReservationKind::CapacityBlock {
        return None;
    }
    if let Some(what) = r.ended() {
        return Some(format!("`{addr}` {what}"));
    }
    let (now, end) = (now?, r.end_ms?);
    (now + WINDOW_MARGIN_MS >= end)
        .then(|| format!("`{addr}` ends {}: its nodes go before the window closes", minute(end)))
}

/// Room reservation `id` (of `count` instances) leaves for this pool: what the other
/// pools' nodes in it do not take.
fn free(cx: &PoolCtx<'_, '_>, id: &str, count: u32) -> u32 {
    let in_it = |n: &&Node| n.pool != *cx.addr && n.is_live() && n.tags.get(TAG_RESERVATION) == Some(id);
    let others = match cx.input.observed {
        Some(nodes) => nodes.iter().filter(in_it).count(),
        None => cx.input.state.resources.values().flat_map(|r| &r.nodes).filter(in_it).count(),
    };
    count.saturating_sub(u32::try_from(others).unwrap_or(u32::MAX))
}

/// The on-demand batch of the reservation's zone (`batch_of` makes one), split: as many nodes as the
/// reservation has room for launch into it (a batch of their own, tagged with its id),
/// the rest as planned.
pub(crate) fn split_creates(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    creates: &mut Vec<CreateNodes>,
    batch_of: impl Fn(&str, u32) -> CreateNodes,
) {
    let Some(r) = shape.reserved.as_deref() else { return };
    let Some(into) = &r.into else { return };
    let in_it = cx.live.iter().filter(|n| n.tags.get(TAG_RESERVATION) == Some(into.id.as_str())).count();
    let room = r.slots.saturating_sub(u32::try_from(in_it).unwrap_or(u32::MAX));
    let bucket = crate::plan::shape::bucket(shape, &r.zone);
    let Some(i) = creates.iter().position(|c| {
        c.capacity == Capacity::OnDemand && (c.zone == bucket || (!c.zones.is_empty() && c.zones.contains(&r.zone)))
    }) else {
        return;
    };
    let k = room.min(creates[i].count);
    if k == 0 {
        return;
    }
    let mut batch = batch_of(&r.zone, k);
    let seed = format!("{}|{}", batch.token, into.id);
    batch.token = format!("gp-{}", &hex(&Sha256::digest(seed.as_bytes()))[..40]);
    batch.tags.insert(TAG_RESERVATION, &into.id);
    batch.zones.clear();
    batch.instance_types = vec![r.instance_type.clone()];
    batch.reservation = Some(Box::new(into.clone()));
    creates[i].count -= k;
    if creates[i].count == 0 {
        creates.remove(i);
    }
    creates.insert(i, batch);
}

/// The pool's nodes in a reservation whose window closes ([`ReservedUse::ending`]): they
/// go whatever runs on them.
pub(crate) fn must_go<'n>(cx: &PoolCtx<'n, '_>, shape: &PoolShape) -> BTreeSet<&'n str> {
    let Some(r) = shape.reserved.as_deref() else { return BTreeSet::new() };
    cx.live
        .iter()
        .filter(|n| n.tags.get(TAG_RESERVATION).is_some_and(|id| r.ending.iter().any(|(e, _)| e == id)))
        .map(|n| n.id.as_str())
        .collect()
}
