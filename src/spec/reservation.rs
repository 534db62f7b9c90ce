//! The `reservation "NAME"` block (docs/design/big-runs.md): decoding, the rules one
//! block keeps on its own (a purchase that cannot be undone needs `commit = true`, a
//! Capacity Block's window is whole days), and the check against its provider (which
//! clouds sell which kind).

use crate::addr::Address;
use crate::catalog::Catalog;
use crate::diag::{Diagnostic, Diagnostics};
use crate::model::reservation::ReservationKind;
use crate::spec::Spec;
use crate::spec::blocks::{finish, meta};
use crate::spec::fields::{Cx, Fields, Reported};
use crate::spec::model::{ProviderKind, Reservation};

pub const RESERVATION_ATTRS: &[&str] = &[
    "provider",
    "region",
    "zone",
    "kind",
    "instance_type",
    "instance_count",
    "start",
    "duration",
    "max_price_usd",
    "commit",
];

/// The longest Capacity Block EC2 sells: 182 days.
const MAX_BLOCK_DAYS: u64 = 182;
const DAY_SECS: u64 = 86_400;

pub fn decode(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<Reservation, Reported> {
    let meta = meta(&mut f, cx, RESERVATION_ATTRS);
    let provider = f.string(cx, "provider");
    let provider = f.required(cx, provider, "provider", "\"aws\"");
    let region = f.string(cx, "region");
    let zone = f.string(cx, "zone");
    let zone = f.required(cx, zone, "zone", "\"us-east-1a\"");
    let kind = f.enumeration(cx, "kind", &ReservationKind::ALL);
    let kind = f.required(cx, kind, "kind", "\"capacity_block\"");
    let instance_type = f.string(cx, "instance_type");
    let instance_type = f.required(cx, instance_type, "instance_type", "\"p5.48xlarge\"");
    let count = f.u32(cx, "instance_count", 1, 10_000);
    let count = f.required(cx, count, "instance_count", "2");
    let start = f.string(cx, "start");
    if let Some(s) = &start
        && humantime::parse_rfc3339_weak(&s.value).is_err()
    {
        f.failed = true;
        cx.diags.push(
            Diagnostic::error("gpuplan::spec::start", format!("`start` holds {:?}, which is not a time", s.value))
                .at(s.span, "expected an RFC 3339 time")
                .help("e.g. `start = \"2027-01-10T00:00:00Z\"`"),
        );
    }
    let duration = f.duration(cx, "duration");
    let max_price_usd = f.number(cx, "max_price_usd", 0.0, 1e12);
    let commit = f.bool(cx, "commit");
    let commit = f.or(commit, false);
    let head = f.head;
    finish(f, cx, RESERVATION_ATTRS)?;
    let r = Reservation {
        provider: provider.ok_or(Reported)?,
        region,
        zone: zone.ok_or(Reported)?,
        kind: kind.ok_or(Reported)?,
        instance_type: instance_type.ok_or(Reported)?,
        instance_count: count.ok_or(Reported)?,
        start,
        duration,
        max_price_usd,
        commit,
        meta,
    };
    check_block(&r, head, cx)?;
    Ok(r)
}

/// What one block must say for its kind: a Capacity Block needs a window of whole days
/// and `commit = true` (it is paid up front and cannot be cancelled).
fn check_block(r: &Reservation, head: crate::diag::Span, cx: &mut Cx<'_, '_>) -> Result<(), Reported> {
    if r.kind.value != ReservationKind::CapacityBlock {
        return Ok(());
    }
    let mut failed = false;
    match &r.duration {
        None => {
            failed = true;
            cx.diags.push(
                Diagnostic::error("gpuplan::spec::reservation", "a Capacity Block needs a `duration`")
                    .at(r.kind.span, "a fixed window")
                    .help("add `duration = \"7d\"` (whole days, 1 to 182)"),
            );
        }
        Some(d) => {
            let secs = d.value.0.as_secs();
            if secs == 0 || secs % DAY_SECS != 0 || secs / DAY_SECS > MAX_BLOCK_DAYS {
                failed = true;
                cx.diags.push(
                    Diagnostic::error(
                        "gpuplan::spec::reservation",
                        format!("a Capacity Block lasts whole days, 1 to {MAX_BLOCK_DAYS}"),
                    )
                    .at(d.span, "not a whole number of days in range")
                    .help("e.g. `duration = \"7d\"`"),
                );
            }
        }
    }
    if !r.commit.value {
        failed = true;
        cx.diags.push(
            Diagnostic::error(
                "gpuplan::spec::commit",
                "a Capacity Block is paid up front and cannot be cancelled: buying it needs `commit = true`",
            )
            .at(head, "not committed")
            .at(r.kind.span, "not cancellable")
            .help("add `commit = true` to this block once the purchase is agreed"),
        );
    }
    if failed { Err(Reported) } else { Ok(()) }
}

/// Which kinds of reservation a cloud sells through gpuplan.
pub fn sells(cloud: ProviderKind, kind: ReservationKind) -> bool {
    match cloud {
        ProviderKind::Sim | ProviderKind::Aws => true,
        ProviderKind::Alicloud => kind == ReservationKind::OnDemand,
        ProviderKind::Tencentcloud => false,
    }
}

/// Each reservation against its provider block and the catalog: the provider exists, its
/// cloud sells this kind, and the instance type is one of the cloud's.
pub fn validate(spec: &Spec, cat: &Catalog, diags: &mut Diagnostics) {
    for (addr, r) in &spec.reservations {
        let Some(provider) = spec.providers.get(&r.provider.value) else {
            let declared: Vec<&str> = spec.providers.keys().map(String::as_str).collect();
            diags.push(
                Diagnostic::error(
                    "gpuplan::spec::missing_provider",
                    format!("`{addr}` uses provider {:?}, but no such provider block is declared", r.provider.value),
                )
                .at(r.provider.span, "no provider block with this name")
                .help(format!(
                    "declared providers: {}",
                    if declared.is_empty() { "none".into() } else { declared.join(", ") }
                )),
            );
            continue;
        };
        let Some(cloud) = provider.kind.value else { continue };
        if !sells(cloud, r.kind.value) {
            diags.push(not_on_this_cloud(addr, r, cloud));
            continue;
        }
        if cat.instance_type(cloud, &r.instance_type.value).is_none() {
            diags.push(
                Diagnostic::error(
                    "gpuplan::spec::instance_type",
                    format!("`{addr}`: {cloud} has no instance type {:?}", r.instance_type.value),
                )
                .at(r.instance_type.span, "not in the catalog")
                .help("`gpuplan offers GPU` lists the instance types on sale"),
            );
        }
    }
}

fn not_on_this_cloud(addr: &Address, r: &Reservation, cloud: ProviderKind) -> Diagnostic {
    let kinds: Vec<&str> =
        ReservationKind::ALL.iter().filter(|(_, k)| sells(cloud, *k)).map(|(name, _)| *name).collect();
    let d = Diagnostic::error(
        "gpuplan::spec::reservation_cloud",
        format!("`{addr}`: a `{}` reservation is not on this cloud ({cloud})", r.kind.value),
    )
    .at(r.kind.span, format!("{cloud} does not sell this through gpuplan"));
    if kinds.is_empty() {
        d.help(format!(
            "{cloud} offers no capacity reservation gpuplan can buy; reserve on `aws`, `alicloud` or `sim` instead"
        ))
    } else {
        d.help(format!("{cloud} sells: {}", kinds.join(", ")))
    }
}
