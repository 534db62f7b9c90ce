//! Applying a reservation's change (docs/design/big-runs.md): buy it (a Capacity Block by
//! the offering the plan chose, or an On-Demand Capacity Reservation), keep its record
//! when only its guards changed, cancel it when removed and the cloud can, or forget it
//! (the plan said so) when it cannot. The purchase is recorded before the change is
//! reported done, so a crash after it leaves the reservation in state, never paid for
//! and unknown; a retried purchase carries the same token and buys nothing twice.

use sha2::{Digest, Sha256};

use super::pool::{Ctx, call, describe};
use super::{Outcome, Status, config_entry, outcome, resource_state};
use crate::hex::hex;
use crate::model::reservation::{ReservationAction, ReservationLine, ReserveRequest};
use crate::plan::{Action, Plan, ResourceChange};
use crate::state::JournalEntry;

pub async fn run(change: &ResourceChange, plan: &Plan, ctx: &Ctx) -> Outcome {
    let Some(line) = plan.reservations.iter().find(|l| l.address == change.address) else {
        // Nothing to buy or cancel (a change the plan has no line for): the record only.
        return record(change, vec![config_entry(change)], ctx).await;
    };
    match run_line(change, line, plan, ctx).await {
        Ok(entries) => record(change, entries, ctx).await,
        Err(why) => outcome(change, Status::Failed(why)),
    }
}

async fn record(change: &ResourceChange, entries: Vec<JournalEntry>, ctx: &Ctx) -> Outcome {
    match ctx.recorder.record(entries).await {
        Ok(()) => outcome(change, Status::Done),
        Err(e) => outcome(change, Status::Failed(e)),
    }
}

/// The cloud call of `line`'s action, and the journal entries that record it.
async fn run_line(
    change: &ResourceChange,
    line: &ReservationLine,
    plan: &Plan,
    ctx: &Ctx,
) -> Result<Vec<JournalEntry>, String> {
    let address = change.address.to_string();
    let provider =
        ctx.providers.get(&line.provider).ok_or_else(|| format!("provider `{}` is not configured", line.provider))?;
    let port =
        || provider.reservations().ok_or_else(|| format!("{} sells no reservations through gpuplan", provider.kind()));
    let reserved = match (change.action, line.action) {
        (Action::Delete, ReservationAction::Cancel) => {
            let id = line.reserved.as_ref().map(|r| r.id.clone()).unwrap_or_default();
            let port = port()?;
            call(ctx, &id, || port.cancel_reservation(&line.region, &id)).await.map_err(describe)?;
            return Ok(vec![JournalEntry::DeleteResource { address }]);
        }
        (Action::Delete, _) => return Ok(vec![JournalEntry::DeleteResource { address }]),
        (_, ReservationAction::Buy) => {
            let seed = format!("{}/{}/{address}/reserve", plan.lineage, plan.serial);
            let req = ReserveRequest {
                kind: line.kind,
                instance_type: line.instance_type.clone(),
                count: line.count,
                zone: line.zone.clone(),
                offering_id: line.offering_id.clone(),
                end_ms: line.end_ms,
                address: address.clone(),
                token: format!("gp-{}", &hex(&Sha256::digest(seed.as_bytes()))[..40]),
            };
            let port = port()?;
            let mut bought = call(ctx, &req.token, || port.reserve(&line.region, &req)).await.map_err(describe)?;
            // A cloud's answer may carry no price (EC2's reservation has none): the
            // price the plan showed and the purchase accepted is what it costs.
            if bought.upfront_usd == 0.0 && bought.usd_per_hour == 0.0 {
                bought.upfront_usd = if line.kind.cancellable() { 0.0 } else { line.commitment_usd };
                bought.usd_per_hour = line.usd_per_hour;
            }
            Box::new(bought)
        }
        _ => line.reserved.clone().ok_or_else(|| format!("`{address}` has no reservation in state to keep"))?,
    };
    let mut resource = resource_state(change, None);
    resource.provider = Some(line.provider.clone());
    resource.provider_kind = Some(provider.kind().to_string());
    resource.region = Some(line.region.clone());
    resource.reservation = Some(reserved);
    Ok(vec![JournalEntry::PutResource { address, resource }])
}
