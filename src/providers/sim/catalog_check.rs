//! Checks of regions, zones and instance types against the three clouds' catalogs.
//!
//! The sim serves every catalog at once, and a region name may exist at two clouds
//! (`ap-southeast-1` at AWS and Alibaba Cloud), so lookups here consider every cloud rather
//! than the first match `Catalog::region` returns.

use crate::catalog::{InstanceType, Region, catalog};
use crate::providers::{ErrorClass, ProviderError};
use crate::spec::model::ProviderKind;

pub fn invalid(code: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::new(ErrorClass::Invalid, code, message)
}

fn regions_named(name: &str) -> impl Iterator<Item = &'static Region> + '_ {
    catalog().regions(ProviderKind::Sim).into_iter().filter(move |r| r.name == name)
}

pub fn check_region(region: &str) -> Result<(), ProviderError> {
    match regions_named(region).next() {
        Some(_) => Ok(()),
        None => Err(invalid(
            "SimUnknownRegion",
            format!("unknown region `{region}`: not in the AWS, Tencent Cloud or Alibaba Cloud catalogs"),
        )),
    }
}

/// The region a zone belongs to, in any catalog.
pub fn region_of_zone(zone: &str) -> Option<&'static str> {
    catalog()
        .regions(ProviderKind::Sim)
        .into_iter()
        .find(|r| r.zones.iter().any(|z| z == zone))
        .map(|r| r.name.as_str())
}

/// Validate a placement and return the types from `types` offered in `zone`, in order.
/// Unknown names are errors (typos); known types not offered in this zone are skipped
/// unless none is left.
pub fn placeable(region: &str, zone: &str, types: &[String]) -> Result<Vec<&'static InstanceType>, ProviderError> {
    check_region(region)?;
    if !regions_named(region).any(|r| r.zones.iter().any(|z| z == zone)) {
        let zones: Vec<&str> = regions_named(region).flat_map(|r| r.zones.iter().map(String::as_str)).collect();
        return Err(invalid(
            "SimUnknownZone",
            format!("unknown zone `{zone}` in region `{region}` (its zones: {})", zones.join(", ")),
        ));
    }
    if types.is_empty() {
        return Err(invalid("SimInvalidParameter", "no instance type given"));
    }
    let mut found = Vec::new();
    for name in types {
        let t = catalog().instance_type(ProviderKind::Sim, name).ok_or_else(|| {
            invalid(
                "SimUnknownInstanceType",
                format!("unknown instance type `{name}`: not in the AWS, Tencent Cloud or Alibaba Cloud catalogs"),
            )
        })?;
        if offered_in_zone(t, region, zone) {
            found.push(t);
        }
    }
    if found.is_empty() {
        return Err(invalid(
            "SimUnsupportedInstanceType",
            format!("none of {} is offered in zone `{zone}` of `{region}`", types.join(", ")),
        ));
    }
    Ok(found)
}

fn offered_in_zone(t: &InstanceType, region: &str, zone: &str) -> bool {
    let Some(cloud) = catalog().cloud(t.cloud) else { return false };
    cloud.regions.iter().filter(|r| r.name == region).any(|r| t.zones_in(r).contains(&zone))
}
