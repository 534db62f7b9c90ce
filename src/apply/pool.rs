//! Executing one pool change: adopt orphans, create node batches (with the pool's
//! fallback on stock-outs), terminate nodes, then record the pool's configuration.
//!
//! Order: create-before-destroy (the default) creates first and deletes afterwards;
//! deletes that only move nodes between zones or capacity types ("rebalance") are
//! skipped when the creates fell short, so a stock-out never shrinks the pool. Creates
//! that only move nodes never fall back: the nodes they were to replace stay instead of
//! being relaunched as the same kind of node on every apply.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::spend::{LedgerPrices, spend_open};
use crate::apply::policy::{self, Decision};
use crate::apply::{Cancel, Outcome, Progress, Recorder, Status, resource_state};
use crate::model::words::{nodes, plural};
use crate::plan::Action;
use crate::plan::model::{PoolChange, ResourceChange};
use crate::providers::{Capacity, CreateNodes, CreateResult, ErrorClass, Provider, ProviderError, ports};
use crate::spec::model::Fallback;
use crate::state::JournalEntry;
use crate::state::model::FallbackRecord;

/// Close the ledger lines of `ids` now, by the provider's clock.
fn spend_close(provider: &dyn Provider, ids: &[String]) -> JournalEntry {
    JournalEntry::SpendClose { ids: ids.to_vec(), at_ms: provider.clock_ms() }
}

pub struct Ctx {
    pub recorder: Recorder,
    pub semaphore: Arc<Semaphore>,
    pub cancel: Arc<Cancel>,
    pub progress: Arc<dyn Progress>,
    pub prices: Arc<LedgerPrices>,
    /// Every provider block by name: a floating pool moving across provider blocks creates
    /// nodes through one and terminates them through another.
    pub providers: Arc<crate::providers::ProviderSet>,
    /// This change's journal entries not yet appended ([`Ctx::defer`]).
    pub pending: std::sync::Mutex<Vec<JournalEntry>>,
}

impl Ctx {
    /// Keep `entries` for this change's next append instead of appending them now: they
    /// go with the next [`record`](Self::record), which every provider call of the change
    /// is preceded by ([`flush`](Self::flush)) and which the change's own record ends it
    /// with. So what a call did is durable before the next call and before the change is
    /// reported done, as when each was appended at once, and a pool that makes one call
    /// waits for one append (one fsync shared with other pools) instead of two: at
    /// 100,000 pools, 100,000 appends fewer for an apply or a destroy.
    fn defer(&self, entries: impl IntoIterator<Item = JournalEntry>) {
        self.pending_entries().extend(entries);
    }

    /// Append the deferred entries, then `more`, in one append; durable when this returns.
    async fn record(&self, more: Vec<JournalEntry>) -> Result<(), String> {
        let mut entries = std::mem::take(&mut *self.pending_entries());
        entries.extend(more);
        if entries.is_empty() {
            return Ok(());
        }
        self.recorder.record(entries).await
    }

    /// Make the deferred entries durable: before each provider call.
    pub(super) async fn flush(&self) -> Result<(), String> {
        self.record(Vec::new()).await
    }

    fn pending_entries(&self) -> std::sync::MutexGuard<'_, Vec<JournalEntry>> {
        // Held only to move entries in or out, never across an await or a panic site, so
        // a poisoned lock still holds whole entries.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub async fn run(change: &ResourceChange, pc: &PoolChange, provider: Arc<dyn Provider>, ctx: &Ctx) -> Outcome {
    let mut out = Outcome {
        address: change.address.clone(),
        action: change.action,
        status: Status::Done,
        created: 0,
        deleted: 0,
        missing: 0,
    };
    let addr = change.address.to_string();
    let mut placement = Placement::default();
    match run_inner(change, pc, provider.as_ref(), ctx, &mut out, &mut placement).await {
        Ok(None) => {}
        Ok(Some(short)) => out.status = Status::Partial(short),
        Err(e) => {
            // What the change did before it failed is recorded all the same. Not dropped:
            // a failed append is kept by the journal writer and fails the apply when it
            // finishes (`RecorderHandle::finish`); the change reports its own error.
            let _ = ctx.flush().await;
            out.status = Status::Failed(e);
            return out;
        }
    }
    let touched = out.created > 0 || out.deleted > 0 || !pc.adopt.is_empty() || !pc.forget.is_empty();
    if change.action == Action::Update && !touched && change.before == change.after {
        // Nothing changed in the cloud or in what gpuplan manages (a retry of the preferred
        // placement that found it still short): the summary does not count it as changed.
        out.action = Action::NoOp;
    }
    let entry = if change.action == Action::Delete && !pc.deferred.is_empty() {
        // Nodes stay under jobs that are not preemptible: the record keeps them (less the
        // nodes terminated, already journaled), and a later plan finishes the removal.
        let jobs: std::collections::BTreeSet<String> = pc.deferred.iter().map(|d| d.job.to_string()).collect();
        let jobs: Vec<String> = jobs.into_iter().collect();
        out.status = Status::Partial(format!(
            "{} {} until {} {} (not preemptible); a later apply or destroy removes them",
            nodes(pc.deferred.len()),
            plural(pc.deferred.len(), "stays", "stay"),
            jobs.join(", "),
            plural(jobs.len(), "ends", "end")
        ));
        None
    } else if change.action == Action::Delete {
        Some(JournalEntry::DeleteResource { address: addr })
    } else {
        let mut resource = resource_state(change, Some(pc));
        // A floating pool whose move found no room stays where it was: that is no fallback
        // within the candidate, and its placement record says so instead.
        resource.fallback = if pc.placement.is_some() && !placement.kept.is_empty() {
            pc.fell_back.as_deref().cloned()
        } else {
            placement.record(pc, provider.clock_ms())
        };
        resource.placement = placement.floating(pc, provider.clock_ms());
        if let Some(alt) = &placement.fell_over {
            // The configuration the pool now runs: the candidate it fell over to, which may
            // be served by another provider block.
            resource.region = Some(alt.region.clone());
            resource.provider = Some(alt.placement.provider.clone());
            if !alt.provider_kind.is_empty() {
                resource.provider_kind = Some(alt.provider_kind.clone());
            }
            let mut config = resource.config.to_value();
            if let Some(o) = config.as_object_mut() {
                o.insert("provider".into(), alt.placement.provider.clone().into());
                o.insert("region".into(), alt.region.clone().into());
                o.remove("zones");
                if !alt.candidate_zones.is_empty() {
                    o.insert("zones".into(), alt.candidate_zones.clone().into());
                }
            }
            resource.config = crate::json_text::JsonText::from_value(&config);
        }
        Some(JournalEntry::PutResource { address: addr, resource })
    };
    if let Err(e) = ctx.record(entry.into_iter().collect()).await {
        out.status = Status::Failed(e);
    }
    out
}

/// Where apply placed nodes other than where the pool prefers them, for the pool's
/// fallback record (docs/design/convergence.md).
#[derive(Debug, Default)]
struct Placement {
    /// What fell back to another zone or to on-demand, one line per batch.
    fell_back: Vec<String>,
    /// Nodes meant to move to the preferred placement that stay where they are, and why.
    kept: Vec<String>,
    /// A floating pool's nodes its candidate had no room for.
    short: Vec<String>,
    /// The other candidate of a floating pool that took those nodes in this apply.
    fell_over: Option<crate::plan::model::Alternate>,
}

impl Placement {
    /// A floating pool's placement record after this apply: where the plan placed it,
    /// unless its candidate had no room. Then the candidate is marked short (the next plan
    /// tries another) and, when the nodes that were to move stayed, the pool stays too.
    fn floating(&self, pc: &PoolChange, now: u64) -> Option<crate::state::model::PlacementRecord> {
        let mut record = pc.placement.as_deref().cloned()?;
        if self.short.is_empty() && self.kept.is_empty() {
            return Some(record);
        }
        let reason = self.short.iter().chain(&self.kept).cloned().collect::<Vec<_>>().join("; ");
        let mark = crate::state::model::ShortRecord {
            provider: record.provider.clone(),
            region: record.region.clone(),
            since_ms: now,
            reason,
        };
        if let Some(alt) = &self.fell_over {
            record = crate::state::model::PlacementRecord { short: record.short, ..alt.placement.clone() };
        } else if let (false, Some(before)) = (self.kept.is_empty(), pc.placement_before.as_deref()) {
            record = crate::state::model::PlacementRecord { short: record.short, ..before.clone() };
        }
        record.short.retain(|s| !(s.provider == mark.provider && s.region == mark.region));
        record.short.push(mark);
        Some(record)
    }

    /// The pool's fallback record after this apply, by the provider's clock `now`.
    fn record(&self, pc: &PoolChange, now: u64) -> Option<FallbackRecord> {
        if !self.kept.is_empty() {
            // The preferred placement was tried and is still short: wait longer next time.
            let reason = self.kept.join("; ");
            return Some(match pc.retry_preferred.as_deref().or(pc.fell_back.as_deref()).cloned() {
                Some(mut r) => {
                    r.failed_retries += 1;
                    r.tried_ms = now;
                    r.reason = reason;
                    r
                }
                None => FallbackRecord { since_ms: now, tried_ms: now, failed_retries: 0, reason },
            });
        }
        if !self.fell_back.is_empty() {
            let reason = self.fell_back.join("; ");
            let since_ms = pc.fell_back.as_ref().map_or(now, |r| r.since_ms);
            return Some(FallbackRecord { since_ms, tried_ms: now, failed_retries: 0, reason });
        }
        // As planned: the nodes that stay in their fallback placement keep the record; a
        // retry that placed everything ends it.
        pc.fell_back.as_deref().cloned()
    }
}

/// Ok(Some(msg)) when done but short of the plan.
async fn run_inner(
    change: &ResourceChange,
    pc: &PoolChange,
    provider: &dyn Provider,
    ctx: &Ctx,
    out: &mut Outcome,
    placement: &mut Placement,
) -> Result<Option<String>, String> {
    let addr = change.address.to_string();
    if !pc.forget.is_empty() {
        let ids = pc.forget.clone();
        let close = spend_close(provider, &ids);
        ctx.defer([JournalEntry::RemoveNodes { address: addr.clone(), ids }, close]);
    }
    if !pc.adopt.is_empty() {
        let open = spend_open(change, pc, provider, &pc.adopt, &ctx.prices);
        ctx.defer([JournalEntry::AddNodes { address: addr.clone(), nodes: pc.adopt.clone() }, open]);
    }
    let creates_first = pc.create_before_destroy || change.action != Action::Replace;
    let moving = pc.deletes.iter().filter(|d| moves_only(pc, d)).count();
    if creates_first {
        let short = creates(change, pc, provider, ctx, out, placement).await?;
        // Move only as many nodes as their replacements were made: a node whose replacement
        // found no capacity stays where it is.
        let planned: usize = pc.creates.iter().map(|b| b.count as usize).sum();
        let movable = if short.is_some() || !placement.kept.is_empty() {
            out.created.saturating_sub(planned - moving).min(moving)
        } else {
            moving
        };
        deletes(change, pc, provider, ctx, out, movable).await?;
        Ok(short)
    } else {
        deletes(change, pc, provider, ctx, out, moving).await?;
        creates(change, pc, provider, ctx, out, placement).await
    }
}

async fn creates(
    change: &ResourceChange,
    pc: &PoolChange,
    provider: &dyn Provider,
    ctx: &Ctx,
    out: &mut Outcome,
    placement: &mut Placement,
) -> Result<Option<String>, String> {
    let mut shortfalls = Vec::new();
    // Only nodes the pool lacks may fall back to another zone or to on-demand. Creates that
    // replace "rebalance" deletes exist only to move nodes; placing them where the old ones
    // already are would terminate and relaunch the same kind of node on every apply while
    // the planned capacity stays short. Those old nodes stay instead.
    let planned: u32 = pc.creates.iter().map(|b| b.count).sum();
    let moving = pc.deletes.iter().filter(|d| moves_only(pc, d)).count() as u32;
    let mut may_fall_back = planned.saturating_sub(moving);
    // A floating pool's nodes its candidate had no room for, by capacity.
    let mut unplaced: Vec<(Capacity, u32)> = Vec::new();
    for batch in &pc.creates {
        if ctx.cancel.is_cancelled() {
            return Err("apply was interrupted before all nodes were created".into());
        }
        let placed = create_with_fallback(change, pc, batch, provider, ctx, may_fall_back).await?;
        may_fall_back -= placed.fell_back;
        out.created += placed.made;
        if !pc.alternates.is_empty() && placed.missing + placed.kept > 0 {
            unplaced.push((batch.capacity, placed.missing + placed.kept));
        }
        placement.fell_back.extend(placed.fallback_note.clone());
        if placed.kept > 0 {
            // Not a shortfall: the pool keeps its nodes where they run, and the fallback
            // record says when the preferred placement is tried again.
            let (at, noun) = (batch.placement(), plural(placed.kept as usize, "node", "nodes"));
            let what = format!("{} {} {noun}", placed.kept, batch.capacity);
            let msg = format!(
                "{at} has no room for {what}: {}; the nodes they were to replace stay where they run",
                placed.why
            );
            ctx.progress.event(&change.address.to_string(), &msg);
            placement.kept.push(format!("{at} had no room for {what}: {}", placed.why));
        }
        if placed.missing > 0 {
            let msg = format!(
                "{} {} {} in {} could not be placed: {}",
                placed.missing,
                batch.capacity,
                plural(placed.missing as usize, "node", "nodes"),
                batch.placement(),
                placed.why
            );
            match (batch.capacity, pc.fallback) {
                // A floating pool short in its candidate: recorded, and the next plan
                // places it in another candidate.
                _ if pc.placement.is_some() => {
                    out.missing += placed.missing;
                    placement.short.push(msg.clone());
                    shortfalls.push(msg)
                }
                (_, Fallback::Wait) => {
                    out.missing += placed.missing;
                    shortfalls.push(msg)
                }
                _ => return Err(msg),
            }
        }
    }
    if !unplaced.is_empty() && fall_over(change, pc, provider, ctx, out, placement, &unplaced).await? {
        // Every node the candidate had no room for runs in another one: no shortfall, and
        // the nodes that were to move went. The candidate stays marked short.
        let missing: u32 = unplaced.iter().map(|u| u.1).sum();
        out.missing = out.missing.saturating_sub(missing);
        let kept: Vec<String> = placement.kept.drain(..).collect();
        placement.short.extend(kept);
        shortfalls.clear();
    }
    Ok(if shortfalls.is_empty() {
        None
    } else {
        Some(format!("{}; will retry on the next apply", shortfalls.join("; ")))
    })
}

/// A floating pool whose candidate had no room: create those nodes in its alternates, best
/// first, within this apply. True when every one of them was placed; the candidate they
/// went to becomes the pool's placement.
async fn fall_over(
    change: &ResourceChange,
    pc: &PoolChange,
    provider: &dyn Provider,
    ctx: &Ctx,
    out: &mut Outcome,
    placement: &mut Placement,
    unplaced: &[(Capacity, u32)],
) -> Result<bool, String> {
    let Some(template) = pc.creates.first() else { return Ok(false) };
    let mut left: Vec<(Capacity, u32)> = unplaced.to_vec();
    for (i, alt) in pc.alternates.iter().enumerate() {
        let Some((alt_pc, alt_provider)) = alternate(pc, alt, provider, ctx) else {
            let msg = format!("provider `{}` is not configured; {} skipped", alt.placement.provider, alt.region);
            ctx.progress.event(&change.address.to_string(), &msg);
            continue;
        };
        let mut made_here = 0;
        for (cap, count) in left.iter_mut().filter(|l| l.1 > 0) {
            // Into the zones a plan would give them there, so the next plan keeps them.
            for (zone, _, n) in alt.layout.iter().filter(|l| l.1 == *cap && l.2 > 0) {
                let want = (*n).min(*count);
                if want == 0 {
                    break;
                }
                let any = zone == crate::plan::shape::ANY_ZONE;
                let batch = CreateNodes {
                    region: alt.region.clone(),
                    zone: if any { alt.zones.first().cloned().unwrap_or_default() } else { zone.clone() },
                    zones: if any { alt.zones.clone() } else { vec![] },
                    instance_types: alt.instance_types.clone(),
                    capacity: *cap,
                    count: want,
                    token: format!("{}-over{i}-{cap}-{zone}", template.token),
                    // Spilled elsewhere: the open market, not the reservation.
                    reservation: None,
                    ..template.clone()
                };
                let placed = create_with_fallback(change, &alt_pc, &batch, alt_provider, ctx, want).await?;
                *count -= placed.made as u32;
                made_here += placed.made;
            }
        }
        if made_here > 0 {
            out.created += made_here;
            let msg = format!(
                "{} the chosen candidate had no room for placed in {} {}",
                nodes(made_here),
                alt.placement.provider,
                alt.region
            );
            ctx.progress.event(&change.address.to_string(), &msg);
            placement.fell_over = Some(alt.clone());
        }
        if left.iter().all(|l| l.1 == 0) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The change and provider a floating pool's nodes are created with in alternate `alt`:
/// the pool's own provider, or the provider block serving that candidate.
fn alternate<'a>(
    pc: &PoolChange,
    alt: &crate::plan::model::Alternate,
    provider: &'a dyn Provider,
    ctx: &'a Ctx,
) -> Option<(PoolChange, &'a dyn Provider)> {
    let name = &alt.placement.provider;
    let alt_provider = through(name, pc, provider, ctx)?;
    let kind = if alt.provider_kind.is_empty() { pc.provider_kind.clone() } else { alt.provider_kind.clone() };
    let alt_pc = PoolChange {
        provider: name.clone(),
        provider_kind: kind,
        region: alt.region.clone(),
        zones: alt.zones.clone(),
        ..pc.clone()
    };
    Some((alt_pc, alt_provider))
}

/// The provider of block `name`: the pool's own `provider`, else (a floating pool's other
/// block) the one the apply was given under that name.
fn through<'a>(name: &str, pc: &PoolChange, provider: &'a dyn Provider, ctx: &'a Ctx) -> Option<&'a dyn Provider> {
    if name == pc.provider { Some(provider) } else { ctx.providers.get(name).map(|p| p.as_ref()) }
}

/// The deletes that only move nodes between zones or capacity types.
const REBALANCE: &str = "rebalance";

/// A delete that only moves a node: a rebalance, or a floating pool's node in the
/// candidate it leaves. It happens only once its replacement was made.
fn moves_only(pc: &PoolChange, d: &crate::plan::model::NodeDelete) -> bool {
    d.reason == REBALANCE || (pc.placement.is_some() && (d.region.is_some() || d.provider.is_some()))
}

/// What one batch achieved.
struct Placed {
    made: usize,
    /// Of `made`, placed somewhere other than planned.
    fell_back: u32,
    /// Not placed, and the pool is short of them.
    missing: u32,
    /// Not placed, but only meant to replace nodes that stay (see `creates`).
    kept: u32,
    /// Where the batch found no room, by capacity type, with the last stock-out answer:
    /// `us-east-1b, us-east-1a had no on-demand capacity (last answer: ...)`.
    why: String,
    /// What fell back where, for the pool's fallback record.
    fallback_note: Option<String>,
}

/// Try the batch where planned, then the pool's other zones, then (spot with
/// `fallback = "on_demand"`) on-demand, falling back for at most `may_fall_back` nodes.
/// A batch the provider places across several zones (EC2 fleets) has tried them all in
/// its one call: its only fallback is one on-demand call over the same zones.
async fn create_with_fallback(
    change: &ResourceChange,
    pc: &PoolChange,
    batch: &CreateNodes,
    provider: &dyn Provider,
    ctx: &Ctx,
    may_fall_back: u32,
) -> Result<Placed, String> {
    let addr = change.address.to_string();
    let tried = batch.placement_zones();
    let others: Vec<&String> = pc.zones.iter().filter(|z| !tried.contains(&z.as_str())).collect();
    let mut places: Vec<(String, Capacity)> = vec![(batch.zone.clone(), batch.capacity)];
    places.extend(others.iter().map(|z| ((*z).clone(), batch.capacity)));
    if batch.capacity == Capacity::Spot && pc.fallback == Fallback::OnDemand {
        places.push((batch.zone.clone(), Capacity::OnDemand));
        places.extend(others.iter().map(|z| ((*z).clone(), Capacity::OnDemand)));
    }
    let mut missing = batch.count;
    let mut made = 0;
    let mut fell_back = 0;
    let mut why = String::new();
    let mut fallback_note: Option<String> = None;
    // Where the batch's own capacity type found no room, for the fallback note.
    let mut short_of: Vec<String> = Vec::new();
    // Every place a call found short, of any capacity type, for the shortfall's message.
    let mut tried_short: Vec<(String, Capacity)> = Vec::new();
    for (k, (zone, cap)) in places.into_iter().enumerate() {
        let want = if k == 0 { missing } else { missing.min(may_fall_back - fell_back) };
        if want == 0 {
            break;
        }
        let req = place_request(batch, zone, cap, want, k);
        ctx.flush().await?;
        let mut result =
            match call(ctx, &req.token, || async { ports::nodes_of(provider)?.create_nodes(&req).await }).await {
                Ok(r) => r,
                // A whole-call stock-out is the same as a result with no nodes.
                Err(e) if e.class == ErrorClass::OutOfCapacity => CreateResult { nodes: vec![], errors: vec![e] },
                Err(e) => return Err(describe(e)),
            };
        let n = result.nodes.len();
        // Said once the call answered: what was placed where (and, for a fallback, why).
        if k == 0 {
            let (of, noun) = if n as u32 == want { (String::new(), n) } else { (format!(" of {want}"), want as usize) };
            let noun = plural(noun, "node", "nodes");
            ctx.progress.event(&addr, &format!("created {n}{of} {} {noun} in {}", req.capacity, req.placement()));
        } else if n > 0 {
            let short = format!("{} had no {} capacity", short_of.join(", "), batch.capacity);
            let noun = plural(n, "node", "nodes");
            let line = format!("{short}; {n} {} {noun} placed in {}", req.capacity, req.placement());
            ctx.progress.event(&addr, &format!("{line} (last answer: {why})"));
            fallback_note = Some(short);
        }
        if n < want as usize && (k == 0 || cap == batch.capacity) {
            short_of.push(req.placement());
        }
        if n < want as usize {
            tried_short.push((req.placement(), cap));
        }
        // Nodes launched into a reservation are recorded as `reserved` capacity.
        result.nodes.iter_mut().for_each(crate::providers::Node::read_reserved);
        if pc.placement.is_some() {
            // A floating pool's nodes say which provider block they live in: the pool may
            // move to another one, and an apply killed mid-move must not lose them.
            for n in result.nodes.iter_mut() {
                n.provider = Some(pc.provider.clone());
            }
        }
        if !result.nodes.is_empty() {
            let open = spend_open(change, pc, provider, &result.nodes, &ctx.prices);
            ctx.defer([JournalEntry::AddNodes { address: addr.clone(), nodes: result.nodes }, open]);
            made += n;
            missing = missing.saturating_sub(n as u32);
            if k > 0 {
                fell_back += n as u32;
            }
        }
        for e in &result.errors {
            if e.class != ErrorClass::OutOfCapacity {
                return Err(describe(e.clone()));
            }
            why = e.message.clone();
        }
    }
    // What could not fall back (the allowance ran out) only moved nodes: those stay.
    let kept = if fell_back >= may_fall_back { missing } else { 0 };
    let why = no_room(&tried_short, &why);
    Ok(Placed { made, fell_back, missing: missing - kept, kept, why, fallback_note })
}

/// Where a batch found no room, each capacity type's places in the order tried, then the
/// cloud's last answer (which names the place it came from, the last one listed):
/// `us-east-1b, us-east-1a had no on-demand capacity (last answer: ...)`.
fn no_room(short: &[(String, Capacity)], last: &str) -> String {
    let mut by_cap: Vec<(Capacity, Vec<&str>)> = Vec::new();
    for (place, cap) in short {
        match by_cap.iter_mut().find(|(c, _)| c == cap) {
            Some((_, places)) => places.push(place),
            None => by_cap.push((*cap, vec![place])),
        }
    }
    let parts: Vec<String> =
        by_cap.iter().map(|(cap, places)| format!("{} had no {cap} capacity", places.join(", "))).collect();
    match (parts.is_empty(), last.is_empty()) {
        (true, _) => last.to_string(),
        (false, true) => parts.join("; "),
        (false, false) => format!("{} (last answer: {last})", parts.join("; ")),
    }
}

/// `batch` asked again of `want` nodes of `cap` in `zone`, its `k`th place.
fn place_request(batch: &CreateNodes, zone: String, cap: Capacity, want: u32, k: usize) -> CreateNodes {
    let mut req = batch.clone();
    if zone != batch.zone {
        // Another single zone: the batch's own zones were all tried.
        req.zones = vec![];
    }
    req.zone = zone;
    req.capacity = cap;
    req.count = want;
    if cap == Capacity::OnDemand {
        req.max_spot_price = None;
    }
    if let Some(join) = req.join.as_mut() {
        // A spot batch falling back to on-demand joins as on-demand, untainted.
        join.set_capacity(cap);
    }
    if k > 0 {
        // A distinct, still deterministic token per fallback placement.
        req.token = format!("{}-f{k}", batch.token);
    }
    req
}

/// Terminate the plan's deletes, of the "rebalance" ones only the first `movable` (those
/// whose replacements were made).
async fn deletes(
    change: &ResourceChange,
    pc: &PoolChange,
    provider: &dyn Provider,
    ctx: &Ctx,
    out: &mut Outcome,
    movable: usize,
) -> Result<(), String> {
    let mut moves = 0;
    // By provider block and region: a floating pool's old nodes are terminated where they run.
    let mut by_place: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for d in pc.deletes.iter() {
        if moves_only(pc, d) {
            moves += 1;
            if moves > movable {
                continue;
            }
        }
        let place = (d.provider.as_deref().unwrap_or(&pc.provider), d.region.as_deref().unwrap_or(&pc.region));
        by_place.entry(place).or_default().push(d.id.clone());
    }
    for ((name, region), ids) in by_place {
        if ctx.cancel.is_cancelled() {
            return Err("apply was interrupted before nodes were terminated".into());
        }
        let addr = change.address.to_string();
        let Some(provider) = through(name, pc, provider, ctx) else {
            return Err(format!(
                "provider `{name}` is not configured; its {} {}",
                nodes(ids.len()),
                plural(ids.len(), "stays", "stay")
            ));
        };
        ctx.flush().await?;
        let gone = call(ctx, &ids[0], || async { ports::nodes_of(provider)?.terminate_nodes(region, &ids).await })
            .await
            .map_err(describe)?;
        let through = if name == pc.provider { String::new() } else { format!(" through {name}") };
        ctx.progress.event(&addr, &format!("terminated {}{through}", nodes(gone.len())));
        out.deleted += gone.len();
        let close = spend_close(provider, &gone);
        ctx.defer([JournalEntry::RemoveNodes { address: addr, ids: gone }, close]);
    }
    Ok(())
}

/// One provider call under the parallelism bound, retried per `policy`.
pub(crate) async fn call<T, F, Fut>(ctx: &Ctx, seed: &str, mut op: F) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ProviderError>>,
{
    let jitter_seed = seed.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let mut attempt = 0;
    loop {
        let result = {
            let _permit = ctx
                .semaphore
                .acquire()
                .await
                .map_err(|_| ProviderError::new(ErrorClass::Fatal, "closed", "executor stopped"))?;
            // Checked once the permit is held: a call that waited for one while the apply
            // was cancelled must not start (the check before the batch came earlier).
            if ctx.cancel.is_cancelled() {
                return Err(ProviderError::new(ErrorClass::Fatal, "Interrupted", ctx.cancel.reason()));
            }
            op().await
        };
        match result {
            Ok(v) => return Ok(v),
            Err(e) => {
                attempt += 1;
                match policy::decide(&e, attempt, jitter_seed) {
                    Decision::Retry(d) if !ctx.cancel.is_cancelled() => {
                        tokio::time::sleep(d.min(Duration::from_secs(60))).await
                    }
                    _ => return Err(e),
                }
            }
        }
    }
}

pub(crate) fn describe(e: ProviderError) -> String {
    let hint = match e.class {
        ErrorClass::Auth => " (check the provider's credentials)",
        ErrorClass::Quota => " (an account limit: ask the cloud for a higher quota)",
        ErrorClass::Throttled => " (still throttled after backing off)",
        ErrorClass::Retryable => " (still failing after retries)",
        _ => "",
    };
    format!("{}: {}{hint}", e.code, e.message)
}
