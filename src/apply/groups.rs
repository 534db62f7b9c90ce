//! A pool's cluster placement groups (`network { placement_group }`,
//! docs/design/big-runs.md): made before the first node of their pool and zone launches
//! into them, deleted once the pool's nodes are gone. Each call goes through the fenced
//! [`PlacementPort`] under the change's retry policy. A provider without the port (the sim
//! cloud, whose nodes carry their group's name) has no group object to make or delete.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::pool::{Ctx, call, describe};
use crate::apply::{Outcome, Status};
use crate::model::hardware::group_noun;
use crate::plan::groups_to_delete;
use crate::plan::model::{PoolChange, ResourceChange};
use crate::providers::Provider;

/// The strategy of every group gpuplan makes (`placement_group = "cluster"`).
pub(crate) const STRATEGY: &str = "cluster";

/// A pool change with its groups: made before its nodes ([`super::pool::run`]), deleted
/// once they are all gone (a failed group call fails the change; a pool whose nodes did
/// not all go keeps its groups).
pub(super) async fn run(
    change: &ResourceChange,
    pc: &PoolChange,
    lineage: &str,
    provider: Arc<dyn Provider>,
    ctx: &Ctx,
) -> Outcome {
    let addr = change.address.to_string();
    if let Err(e) = ensure(&addr, pc, provider.as_ref(), ctx).await {
        let status = Status::Failed(e);
        return Outcome {
            address: change.address.clone(),
            action: change.action,
            status,
            created: 0,
            deleted: 0,
            missing: 0,
        };
    }
    let mut out = super::pool::run(change, pc, provider.clone(), ctx).await;
    if out.status == Status::Done
        && let Err(e) = release(&addr, change, lineage, provider.as_ref(), ctx).await
    {
        out.status = Status::Failed(e);
    }
    out
}

/// Readies the fabric of `pc`'s batches (once per region and fabric), then makes each
/// group they launch into (once per name), before any of them launches.
async fn ensure(addr: &str, pc: &PoolChange, provider: &dyn Provider, ctx: &Ctx) -> Result<(), String> {
    ensure_fabric(addr, pc, provider, ctx).await?;
    let Some(port) = provider.placement() else { return Ok(()) };
    let mut done = BTreeSet::new();
    for batch in &pc.creates {
        let Some(name) = batch.hardware.as_ref().and_then(|h| h.placement_group.as_deref()) else { continue };
        if !done.insert(name) {
            continue;
        }
        ctx.flush().await?;
        call(ctx, name, || port.ensure_group(&batch.region, &batch.zone, name, STRATEGY, &batch.tags))
            .await
            .map_err(|e| format!("{} {name}: {}", group_noun(&pc.provider_kind), describe(e)))?;
        ctx.progress.event(addr, &format!("{} {name} ready", group_noun(&pc.provider_kind)));
    }
    Ok(())
}

/// What the fabric of `pc`'s batches needs beside the nodes ([`crate::providers::FabricPort`]:
/// on AWS, EFA's security group rules), through the fenced port. A provider without the
/// port needs nothing beyond each launch's own settings.
async fn ensure_fabric(addr: &str, pc: &PoolChange, provider: &dyn Provider, ctx: &Ctx) -> Result<(), String> {
    let Some(port) = provider.fabric() else { return Ok(()) };
    let mut done = BTreeSet::new();
    for batch in &pc.creates {
        let Some(fabric) = batch.hardware.as_ref().and_then(|h| h.fabric) else { continue };
        if !done.insert((batch.region.as_str(), fabric)) {
            continue;
        }
        ctx.flush().await?;
        call(ctx, addr, || port.ensure_fabric(&batch.region, fabric))
            .await
            .map_err(|e| format!("fabric {fabric}: {}", describe(e)))?;
        ctx.progress.event(addr, &format!("fabric {fabric} ready in {}", batch.region));
    }
    Ok(())
}

/// Deletes the groups of a pool whose nodes are all gone ([`groups_to_delete`]).
async fn release(
    addr: &str,
    change: &ResourceChange,
    lineage: &str,
    provider: &dyn Provider,
    ctx: &Ctx,
) -> Result<(), String> {
    let (Some(port), Some(pc)) = (provider.placement(), &change.pool) else { return Ok(()) };
    for name in &groups_to_delete(lineage, change) {
        ctx.flush().await?;
        call(ctx, name, || port.delete_group(&pc.region, name))
            .await
            .map_err(|e| format!("{} {name}: {}", group_noun(&pc.provider_kind), describe(e)))?;
        ctx.progress.event(addr, &format!("deleted {} {name}", group_noun(&pc.provider_kind)));
    }
    Ok(())
}
