//! Executing one pool change: adopt orphans, create node batches (with the pool's
//! fallback on stock-outs), terminate nodes, then record the pool's configuration.
//!
//! Order: create-before-destroy (the default) creates first and deletes afterwards;
//! deletes that only move nodes between zones or capacity types ("rebalance") are
//! skipped when the creates fell short, so a stock-out never shrinks the pool.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::apply::policy::{self, Decision};
use crate::apply::{Cancel, Outcome, Progress, Recorder, Status, resource_state};
use crate::plan::Action;
use crate::plan::model::{PoolChange, ResourceChange};
use crate::providers::{Capacity, CreateNodes, CreateResult, ErrorClass, Provider, ProviderError};
use crate::spec::model::Fallback;
use crate::state::JournalEntry;

pub struct Ctx {
    pub recorder: Recorder,
    pub semaphore: Arc<Semaphore>,
    pub cancel: Arc<Cancel>,
    pub progress: Arc<dyn Progress>,
}

pub async fn run(change: &ResourceChange, pc: &PoolChange, provider: Arc<dyn Provider>, ctx: &Ctx) -> Outcome {
    let mut out = Outcome {
        address: change.address.clone(),
        action: change.action,
        status: Status::Done,
        created: 0,
        deleted: 0,
    };
    let addr = change.address.to_string();
    match run_inner(change, pc, provider.as_ref(), ctx, &mut out).await {
        Ok(None) => {}
        Ok(Some(short)) => out.status = Status::Partial(short),
        Err(e) => {
            out.status = Status::Failed(e);
            return out;
        }
    }
    let entry = if change.action == Action::Delete {
        JournalEntry::DeleteResource { address: addr }
    } else {
        JournalEntry::PutResource { address: addr, resource: resource_state(change, Some(pc)) }
    };
    if let Err(e) = ctx.recorder.record(vec![entry]).await {
        out.status = Status::Failed(e);
    }
    out
}

/// Ok(Some(msg)) when done but short of the plan.
async fn run_inner(
    change: &ResourceChange,
    pc: &PoolChange,
    provider: &dyn Provider,
    ctx: &Ctx,
    out: &mut Outcome,
) -> Result<Option<String>, String> {
    let addr = change.address.to_string();
    if !pc.forget.is_empty() {
        let ids = pc.forget.clone();
        ctx.recorder.record(vec![JournalEntry::RemoveNodes { address: addr.clone(), ids }]).await?;
    }
    if !pc.adopt.is_empty() {
        ctx.recorder.record(vec![JournalEntry::AddNodes { address: addr.clone(), nodes: pc.adopt.clone() }]).await?;
    }
    let creates_first = pc.create_before_destroy || change.action != Action::Replace;
    if creates_first {
        let short = creates(change, pc, provider, ctx, out).await?;
        deletes(change, pc, provider, ctx, out, short.is_some()).await?;
        Ok(short)
    } else {
        deletes(change, pc, provider, ctx, out, false).await?;
        creates(change, pc, provider, ctx, out).await
    }
}

async fn creates(
    change: &ResourceChange,
    pc: &PoolChange,
    provider: &dyn Provider,
    ctx: &Ctx,
    out: &mut Outcome,
) -> Result<Option<String>, String> {
    let mut shortfalls = Vec::new();
    for batch in &pc.creates {
        if ctx.cancel.is_cancelled() {
            return Err("apply was interrupted before all nodes were created".into());
        }
        let (made, missing, why) = create_with_fallback(change, pc, batch, provider, ctx).await?;
        out.created += made;
        if missing > 0 {
            let msg = format!("{missing} {} node(s) in {} could not be placed ({why})", batch.capacity, batch.zone);
            match (batch.capacity, pc.fallback) {
                (_, Fallback::Wait) => shortfalls.push(msg),
                _ => return Err(msg),
            }
        }
    }
    Ok(if shortfalls.is_empty() {
        None
    } else {
        Some(format!("{}; will retry on the next apply", shortfalls.join("; ")))
    })
}

/// Try the batch where planned, then the pool's other zones, then (spot with
/// `fallback = "on_demand"`) on-demand. Returns (created, still missing, last reason).
async fn create_with_fallback(
    change: &ResourceChange,
    pc: &PoolChange,
    batch: &CreateNodes,
    provider: &dyn Provider,
    ctx: &Ctx,
) -> Result<(usize, u32, String), String> {
    let addr = change.address.to_string();
    let mut places: Vec<(String, Capacity)> = vec![(batch.zone.clone(), batch.capacity)];
    places.extend(pc.zones.iter().filter(|z| **z != batch.zone).map(|z| (z.clone(), batch.capacity)));
    if batch.capacity == Capacity::Spot && pc.fallback == Fallback::OnDemand {
        places.push((batch.zone.clone(), Capacity::OnDemand));
        places.extend(pc.zones.iter().filter(|z| **z != batch.zone).map(|z| (z.clone(), Capacity::OnDemand)));
    }
    let mut missing = batch.count;
    let mut made = 0;
    let mut why = String::new();
    for (k, (zone, cap)) in places.into_iter().enumerate() {
        if missing == 0 {
            break;
        }
        let mut req = batch.clone();
        req.zone = zone;
        req.capacity = cap;
        req.count = missing;
        if cap == Capacity::OnDemand {
            req.max_spot_price = None;
        }
        if k > 0 {
            // A distinct, still deterministic token per fallback placement.
            req.token = format!("{}-f{k}", batch.token);
            ctx.progress
                .event(&addr, &format!("falling back to {} in {} for {missing} node(s)", req.capacity, req.zone));
        } else {
            ctx.progress.event(&addr, &format!("creating {missing} {} node(s) in {}", req.capacity, req.zone));
        }
        let result = match call(ctx, &req.token, || provider.create_nodes(&req)).await {
            Ok(r) => r,
            // A whole-call stock-out is the same as a result with no nodes.
            Err(e) if e.class == ErrorClass::OutOfCapacity => CreateResult { nodes: vec![], errors: vec![e] },
            Err(e) => return Err(describe(e)),
        };
        if !result.nodes.is_empty() {
            let n = result.nodes.len();
            ctx.recorder.record(vec![JournalEntry::AddNodes { address: addr.clone(), nodes: result.nodes }]).await?;
            made += n;
            missing = missing.saturating_sub(n as u32);
        }
        for e in &result.errors {
            if e.class != ErrorClass::OutOfCapacity {
                return Err(describe(e.clone()));
            }
            why = e.message.clone();
        }
    }
    Ok((made, missing, why))
}

async fn deletes(
    change: &ResourceChange,
    pc: &PoolChange,
    provider: &dyn Provider,
    ctx: &Ctx,
    out: &mut Outcome,
    creates_fell_short: bool,
) -> Result<(), String> {
    let ids: Vec<String> =
        pc.deletes.iter().filter(|d| !(creates_fell_short && d.reason == "rebalance")).map(|d| d.id.clone()).collect();
    if ids.is_empty() {
        return Ok(());
    }
    if ctx.cancel.is_cancelled() {
        return Err("apply was interrupted before nodes were terminated".into());
    }
    let addr = change.address.to_string();
    ctx.progress.event(&addr, &format!("terminating {} node(s)", ids.len()));
    let gone = call(ctx, &ids[0], || provider.terminate_nodes(&pc.region, &ids)).await.map_err(describe)?;
    out.deleted += gone.len();
    ctx.recorder.record(vec![JournalEntry::RemoveNodes { address: addr, ids: gone }]).await?;
    Ok(())
}

/// One provider call under the parallelism bound, retried per `policy`.
async fn call<T, F, Fut>(ctx: &Ctx, seed: &str, mut op: F) -> Result<T, ProviderError>
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

fn describe(e: ProviderError) -> String {
    let hint = match e.class {
        ErrorClass::Auth => " (check the provider's credentials)",
        ErrorClass::Quota => " (an account limit: ask the cloud for a higher quota)",
        ErrorClass::Throttled => " (still throttled after backing off)",
        ErrorClass::Retryable => " (still failing after retries)",
        _ => "",
    };
    format!("{}: {}{hint}", e.code, e.message)
}
