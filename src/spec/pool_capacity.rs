//! A pool's `capacity {}` block (docs/design/big-runs.md): `reservation =
//! reservation.NAME`, or `"open"` for any matching open On-Demand reservation; decoding,
//! and the check that the reservation can hold the pool's nodes (same provider block and
//! region, an instance type the pool runs, a zone it uses), located at the attribute.

use crate::addr::{Address, Kind};
use crate::catalog::Catalog;
use crate::diag::{Diagnostic, Diagnostics};
use crate::spec::Spec;
use crate::spec::capacity_use::CapacityUse;
use crate::spec::fields::{Cx, Fields, Reported};
use crate::spec::model::{GpuPool, Reservation, Spanned};

/// `capacity { reservation = ... }`.
pub fn capacity(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<CapacityUse, Reported> {
    let span = f.head;
    let got = f.try_address_or_word(cx, "reservation", Kind::Reservation, "open");
    let got = f.flag(got);
    let got = f.required(cx, got, "reservation", "reservation.h100_block");
    let failed = f.failed;
    f.finish(cx, &["reservation"]);
    let got = got.ok_or(Reported)?;
    if failed {
        return Err(Reported);
    }
    let text = got.value.as_ref().map_or_else(|| "open".to_string(), Address::to_string);
    Ok(CapacityUse { reservation: Spanned::new(text, got.span), span })
}

/// Each pool's `capacity {}` against the reservation it names: the reservation must be
/// declared, on the pool's provider block and region, of an instance type the pool runs,
/// in a zone it uses. `"open"` needs a cloud that sells On-Demand reservations.
pub fn validate_pools(spec: &Spec, cat: &Catalog, diags: &mut Diagnostics) {
    for (addr, pool) in &spec.gpu_pools {
        let Some(cap) = pool.capacity.as_deref() else { continue };
        if pool.placement.is_some() {
            diags.push(
                Diagnostic::error(
                    "gpuplan::spec::capacity",
                    format!("`{addr}` floats between places, so it cannot use one reservation"),
                )
                .at(cap.reservation.span, "a floating pool")
                .help("give the pool a `provider` and `region` instead of `placement`, or remove `capacity {}`"),
            );
            continue;
        }
        let Some(target) = cap.target() else {
            let cloud = spec.providers.get(&pool.provider.value).and_then(|p| p.kind.value);
            if let Some(cloud) = cloud
                && !crate::spec::reservation::sells(cloud, crate::model::reservation::ReservationKind::OnDemand)
            {
                diags.push(
                    Diagnostic::error(
                        "gpuplan::spec::reservation_cloud",
                        format!("`{addr}`: open reservations are not on this cloud ({cloud})"),
                    )
                    .at(cap.reservation.span, format!("{cloud} sells no reservation gpuplan can use"))
                    .help("remove `capacity {}`, or run the pool on `aws`, `alicloud` or `sim`"),
                );
            }
            continue;
        };
        let Some(r) = spec.reservations.get(&target) else { continue };
        if let Some(why) = mismatch(spec, cat, pool, r) {
            diags.push(
                Diagnostic::error(
                    "gpuplan::spec::capacity",
                    format!(
                        "`{target}` holds {} × {} in {}, which `{addr}` cannot run: {why}",
                        r.instance_count.value, r.instance_type.value, r.zone.value
                    ),
                )
                .at(cap.reservation.span, "this reservation cannot hold the pool's nodes")
                .at(r.meta.span, "reserved here")
                .help("reserve what the pool runs (its provider, region, a zone of `zones` and one of its instance types), or point `capacity` at another reservation".to_string()),
            );
        }
    }
}

/// Why reservation `r` cannot hold `pool`'s nodes, if it cannot.
fn mismatch(spec: &Spec, cat: &Catalog, pool: &GpuPool, r: &Reservation) -> Option<String> {
    if r.provider.value != pool.provider.value {
        return Some(format!(
            "it is bought through provider `{}`, the pool runs on `{}`",
            r.provider.value, pool.provider.value
        ));
    }
    let region_of = |own: Option<&Spanned<String>>| {
        own.or_else(|| spec.providers.get(&pool.provider.value).and_then(|p| p.region.as_ref()))
            .map(|s| s.value.clone())
    };
    let (pool_region, res_region) = (region_of(pool.region.as_ref()), region_of(r.region.as_ref()));
    if pool_region != res_region {
        let show = |r: Option<String>| r.unwrap_or_else(|| "no region".into());
        return Some(format!("it is in {}, the pool in {}", show(res_region), show(pool_region)));
    }
    let ty = &r.instance_type.value;
    if !pool.instance_types.is_empty() {
        if !pool.instance_types.iter().any(|t| &t.value == ty) {
            let types: Vec<&str> = pool.instance_types.iter().map(|t| t.value.as_str()).collect();
            return Some(format!("{ty} is not among its `instance_types` ({})", types.join(", ")));
        }
    } else {
        let cloud = spec.providers.get(&pool.provider.value).and_then(|p| p.kind.value)?;
        let t = cat.instance_type(cloud, ty)?;
        if t.gpu != pool.gpu.value || t.gpus != pool.gpus_per_node.value {
            return Some(format!(
                "{ty} has {} × {}, the pool's nodes {} × {}",
                t.gpus, t.gpu, pool.gpus_per_node.value, pool.gpu.value
            ));
        }
    }
    if !pool.zones.is_empty() && !pool.zones.iter().any(|z| z.value == r.zone.value) {
        let zones: Vec<&str> = pool.zones.iter().map(|z| z.value.as_str()).collect();
        return Some(format!("{} is not among its `zones` ({})", r.zone.value, zones.join(", ")));
    }
    None
}
