//! Reading reservations from the clouds (docs/design/big-runs.md) for the plan
//! ([`crate::plan::reservations`]): what they offer for the spec's new Capacity Blocks
//! ([`offers`]; only reservations the state holds nothing for are asked about), and the
//! reservations the state holds as the clouds hold them now ([`read_held`]), so that one that
//! expired or was cancelled outside gpuplan is no longer planned as kept.

use crate::addr::Address;
use crate::apply::ProviderSet;
use crate::engine::error::RunError;
use crate::model::reservation::{OfferingQuery, ReservationKind};
use crate::plan::reservations::{Observed, Offers};
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

/// Every reservation the state records, read back from its cloud: one
/// `DescribeCapacityReservations`-like call per provider block and region. An id the
/// cloud no longer lists maps to `None`. A record whose provider block is gone from the
/// spec is left out (planned from its record); a cloud that fails fails the refresh.
pub async fn read_held(state: &State, providers: &ProviderSet) -> Result<Observed, RunError> {
    let mut asks: std::collections::BTreeMap<(String, String), Vec<(Address, String)>> = Default::default();
    for (key, r) in &state.resources {
        let (Some(held), Some(provider), Some(region)) = (r.reservation.as_deref(), &r.provider, &r.region) else {
            continue;
        };
        let Ok(addr) = key.parse::<Address>() else { continue };
        asks.entry((provider.clone(), region.clone())).or_default().push((addr, held.id.clone()));
    }
    let mut out = Observed::new();
    for ((name, region), wanted) in asks {
        let Some(port) = providers.get(&name).and_then(|p| p.reservations()) else { continue };
        let ids: Vec<String> = wanted.iter().map(|(_, id)| id.clone()).collect();
        let found = port
            .describe_reservations(&region, &ids)
            .await
            .map_err(|error| RunError::Refresh { provider: name.clone(), error })?;
        for (addr, id) in wanted {
            out.insert(addr, found.iter().find(|r| r.id == id).cloned());
        }
    }
    Ok(out)
}
