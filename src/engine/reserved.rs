//! Reading what the clouds offer for the spec's new Capacity Blocks
//! (docs/design/big-runs.md), for the plan to choose from
//! ([`crate::plan::reservations`]). Only reservations the state holds nothing for are
//! asked about: a bought one is planned from its record.

use crate::addr::Address;
use crate::apply::ProviderSet;
use crate::model::reservation::{OfferingQuery, ReservationKind};
use crate::plan::reservations::Offers;
use crate::spec::Spec;
use crate::state::State;

/// The offerings of each new Capacity Block of `spec`, as its provider lists them. A
/// provider that sells none, or fails, leaves an error the plan shows at the block.
pub async fn offers(
    spec: &Spec,
    state: &State,
    providers: &ProviderSet,
    clocks: &std::collections::BTreeMap<String, u64>,
) -> Offers {
    let mut out = Offers::new();
    for (addr, r) in &spec.reservations {
        if r.kind.value != ReservationKind::CapacityBlock || held(state, addr) {
            continue;
        }
        let Some(p) = providers.get(&r.provider.value) else {
            out.insert(addr.clone(), Err(format!("provider `{}` is not configured", r.provider.value)));
            continue;
        };
        let Some(port) = p.reservations() else {
            out.insert(addr.clone(), Err(format!("{} sells no Capacity Blocks", p.kind())));
            continue;
        };
        let block = spec.providers.get(&r.provider.value);
        let region = r.region.as_ref().or_else(|| block.and_then(|b| b.region.as_ref()));
        let Some(region) = region else { continue };
        let now = clocks.get(&r.provider.value).copied().unwrap_or(0);
        let q = OfferingQuery {
            instance_type: r.instance_type.value.clone(),
            count: r.instance_count.value,
            start_ms: crate::plan::reservations::start_of(r).unwrap_or(now),
            hours: r.duration.as_ref().map_or(24, |d| u32::try_from(d.value.0.as_secs() / 3600).unwrap_or(u32::MAX)),
            zone: Some(r.zone.value.clone()),
        };
        let found = port.capacity_block_offerings(&region.value, &q).await.map_err(|e| e.to_string());
        out.insert(addr.clone(), found);
    }
    out
}

fn held(state: &State, addr: &Address) -> bool {
    state.resources.get(&addr.to_string()).is_some_and(|r| r.reservation.is_some())
}
