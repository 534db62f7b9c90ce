//! Row checks for a cloud's catalog file. The tests run them over every embedded file; they
//! return every problem at once so one run lists everything a data edit broke.

use std::collections::HashSet;

use super::{CloudCatalog, Currency, GPU_MODELS};
use crate::model::ProviderKind;

/// Everything wrong with `cloud`, one message per problem. Dates (`as_of`) must be valid
/// `YYYY-MM-DD` and not after `not_after`.
pub fn problems(cloud: &CloudCatalog, not_after: &str) -> Vec<String> {
    let mut out = Vec::new();
    let expected = match cloud.cloud {
        ProviderKind::Aws => Some(Currency::Usd),
        ProviderKind::Tencentcloud | ProviderKind::Alicloud => Some(Currency::Cny),
        ProviderKind::Sim => None,
    };
    if expected != Some(cloud.currency) {
        out.push(format!("{}: currency {} is not the cloud's billing currency", cloud.cloud, cloud.currency));
    }
    if !(cloud.spot_discount > 0.0 && cloud.spot_discount < 1.0) {
        out.push(format!("{}: spot discount {} is not in (0, 1)", cloud.cloud, cloud.spot_discount));
    }
    if cloud.spot_source.trim().is_empty() {
        out.push(format!("{}: spot source is empty", cloud.cloud));
    }
    check_date(&mut out, &format!("{}: spot", cloud.cloud), &cloud.spot_as_of, not_after);

    let mut region_names = HashSet::new();
    let mut zones = HashSet::new();
    for region in &cloud.regions {
        if !region_names.insert(region.name.as_str()) {
            out.push(format!("{}: region {} listed twice", cloud.cloud, region.name));
        }
        if region.cloud != cloud.cloud {
            out.push(format!("{}: region {} belongs to {}", cloud.cloud, region.name, region.cloud));
        }
        if region.zones.is_empty() {
            out.push(format!("{}: region {} has no zones", cloud.cloud, region.name));
        }
        for zone in &region.zones {
            if !zones.insert(zone.as_str()) {
                out.push(format!("{}: zone {zone} listed twice", cloud.cloud));
            }
            if !(zone.starts_with(&region.name) && zone.len() > region.name.len()) {
                out.push(format!("{}: zone {zone} is not named after its region {}", cloud.cloud, region.name));
            }
        }
    }
    if !region_names.contains(cloud.price_region.as_str()) {
        out.push(format!("{}: price region {} is not a listed region", cloud.cloud, cloud.price_region));
    }

    let mut names = HashSet::new();
    for t in &cloud.instance_types {
        let at = format!("{}: {}", cloud.cloud, t.name);
        let mut bad = |msg: String| out.push(format!("{at}: {msg}"));
        if !names.insert(t.name.as_str()) {
            bad("listed twice".into());
        }
        if t.cloud != cloud.cloud {
            bad(format!("belongs to {}", t.cloud));
        }
        match GPU_MODELS.iter().find(|m| m.name == t.gpu) {
            None => bad(format!("GPU {} is not a canonical model name", t.gpu)),
            Some(m) if t.gpu_memory_gib != f64::from(m.memory_gib) => {
                bad(format!("GPU memory {} GiB, but {} has {} GiB", t.gpu_memory_gib, m.name, m.memory_gib))
            }
            Some(_) => {}
        }
        if t.gpus == 0 {
            bad("has no GPUs".into());
        }
        if t.vcpu == 0 || !(t.ram_gib > 0.0 && t.ram_gib.is_finite()) {
            bad(format!("vCPU {} / RAM {} GiB must be positive", t.vcpu, t.ram_gib));
        }
        if !(t.price > 0.0 && t.price.is_finite()) {
            bad(format!("price {} must be positive and finite", t.price));
        }
        if t.currency != cloud.currency {
            bad(format!("currency {} differs from the file's {}", t.currency, cloud.currency));
        }
        if !(t.spot_discount > 0.0 && t.spot_discount < 1.0) {
            bad(format!("spot discount {} is not in (0, 1)", t.spot_discount));
        }
        if t.regions.is_empty() {
            bad("lists no regions".into());
        }
        for r in t.regions.iter().filter(|r| !region_names.contains(r.as_str())) {
            bad(format!("region {r} is not in the file's region list"));
        }
        for z in &t.zones {
            let home = cloud.regions.iter().find(|r| r.zones.contains(z));
            if !home.is_some_and(|r| t.regions.contains(&r.name)) {
                bad(format!("zone {z} is not a zone of the type's regions"));
            }
        }
        if t.price_source.trim().is_empty() {
            bad("price source is empty".into());
        }
        if t.price_estimated && t.note.as_deref().is_none_or(|n| n.trim().is_empty()) {
            bad("estimated price without a note saying how".into());
        }
        check_date(&mut out, &at, &t.as_of, not_after);
    }
    out
}

fn check_date(out: &mut Vec<String>, at: &str, date: &str, not_after: &str) {
    if !is_date(date) {
        out.push(format!("{at}: as_of {date:?} is not a YYYY-MM-DD date"));
    } else if date > not_after {
        out.push(format!("{at}: as_of {date} is after {not_after}"));
    }
}

/// `YYYY-MM-DD` with a real month and day (leap years included).
pub(super) fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if !s.is_ascii() || b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = &s[r];
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok()).flatten()
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}
