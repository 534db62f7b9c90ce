//! Reservations in a plan (docs/design/big-runs.md): for each `reservation` of the spec
//! or the state, what it commits and what apply does to it. A new Capacity Block takes the
//! earliest offering the cloud listed (refresh reads them) within `max_price_usd`; a new
//! On-Demand reservation is priced at the catalog's on-demand rate. Removing one cancels
//! it when the cloud can, and otherwise forgets it with a note: it stays paid until it
//! ends. A reservation the state holds is planned as refresh read it back: one that
//! expired, was cancelled outside gpuplan or is gone from the cloud holds no capacity, so
//! it is `ended` (apply records what happened and buys nothing), never `keep`. Pure: the
//! offerings and the reservations read back come in from the observation.

use std::collections::BTreeMap;

use crate::addr::{Address, Kind};
use crate::model::reservation::{GONE, Offering, ReservationAction, ReservationKind, ReservationLine, Reserved};
use crate::plan::model::{PlanError, PlanNote};
use crate::spec::Spec;
use crate::spec::model::Reservation;
use crate::state::State;

/// What the clouds listed for each new Capacity Block (an error says why they could
/// not); `None` when the plan did not refresh.
pub type Offers = BTreeMap<Address, Result<Vec<Offering>, String>>;

/// The reservations the state holds as their clouds answered (`None`: the cloud no
/// longer lists it), by address; a reservation left out was not read.
pub type Observed = BTreeMap<Address, Option<Reserved>>;

/// What the clouds were read for: offerings of new Capacity Blocks, the held reservations.
/// Both `None` when the plan did not refresh.
#[derive(Debug, Clone, Copy, Default)]
pub struct Read<'a> {
    pub offers: Option<&'a Offers>,
    pub held: Option<&'a Observed>,
}

/// What [`plan`] found: the lines, the errors that stop an apply, notes for people.
#[derive(Debug, Default)]
pub struct Planned {
    pub lines: Vec<ReservationLine>,
    pub errors: Vec<PlanError>,
    pub notes: Vec<PlanNote>,
    /// Reservations refresh found ended since the state recorded them: apply records
    /// the new record (their change is an update).
    pub refreshed: Vec<Address>,
}

/// The attributes a reservation may change in place: they only guard the purchase.
const IN_PLACE: &[&str] = &["commit", "max_price_usd", "depends_on", "lifecycle"];

/// `now` is the clock of a provider block by name.
pub fn plan(spec: &Spec, state: &State, read: Read<'_>, destroy: bool, now: &dyn Fn(&str) -> u64) -> Planned {
    let mut out = Planned::default();
    let mut addrs: Vec<Address> = state
        .resources
        .iter()
        .filter(|(k, r)| r.kind == Kind::Reservation.as_str() && !k.is_empty())
        .filter_map(|(k, _)| k.parse().ok())
        .collect();
    if !destroy {
        addrs.extend(spec.reservations.keys().cloned());
    }
    addrs.sort();
    addrs.dedup();
    for addr in addrs {
        let prior = state.resources.get(&addr.to_string());
        let wanted = if destroy { None } else { spec.reservations.get(&addr) };
        let recorded = prior.and_then(|p| p.reservation.as_deref());
        let held = recorded.map(|r| refreshed(r, read.held.and_then(|o| o.get(&addr)).map(Option::as_ref)));
        match (held.as_ref(), wanted) {
            (None, Some(r)) => buy(&addr, r, spec, read.offers, now(&r.provider.value), &mut out),
            (Some(held), Some(r)) => {
                let before = prior.map(|p| p.config.to_value()).unwrap_or_default();
                check_in_place(&addr, r, &before, &mut out);
                let action = match held.ended() {
                    Some(what) => {
                        note_ended(&addr, held, &what, &mut out);
                        if recorded.is_some_and(|r| r.state != held.state) {
                            out.refreshed.push(addr.clone());
                        }
                        ReservationAction::Ended
                    }
                    None => ReservationAction::Keep,
                };
                out.lines.push(held_line(&addr, prior, held, action));
            }
            (Some(held), None) => {
                let now_ms = now(prior.and_then(|p| p.provider.as_deref()).unwrap_or_default());
                let action = if held.cancellable() && held.is_live() {
                    ReservationAction::Cancel
                } else {
                    ReservationAction::Forget
                };
                if action == ReservationAction::Forget
                    && held.is_live()
                    && let Some(end) = held.end_ms.filter(|end| *end > now_ms)
                {
                    out.notes.push(PlanNote {
                        address: addr.clone(),
                        message: format!(
                            "`{addr}` cannot be cancelled: apply forgets it, and {} stays paid and reserved until {}",
                            held.id,
                            crate::model::reservation::minute(end)
                        ),
                    });
                }
                out.lines.push(held_line(&addr, prior, held, action));
            }
            (None, None) => {}
        }
    }
    out
}

/// The recorded reservation as refresh read it back (`seen`: `None` when it was not read,
/// `Some(None)` when the cloud no longer lists it). What was paid stays the record's: a
/// cloud's answer may carry no price.
fn refreshed(recorded: &Reserved, seen: Option<Option<&Reserved>>) -> Reserved {
    match seen {
        None => recorded.clone(),
        Some(None) => Reserved { state: GONE.to_string(), ..recorded.clone() },
        Some(Some(now)) => Reserved {
            id: recorded.id.clone(),
            upfront_usd: recorded.upfront_usd,
            usd_per_hour: recorded.usd_per_hour,
            end_ms: now.end_ms.or(recorded.end_ms),
            start_ms: if now.start_ms == 0 { recorded.start_ms } else { now.start_ms },
            ..now.clone()
        },
    }
}

/// What happened to a reservation the spec still has that holds no capacity now.
fn note_ended(addr: &Address, held: &Reserved, what: &str, out: &mut Planned) {
    out.notes.push(PlanNote {
        address: addr.clone(),
        message: format!(
            "`{addr}` ({}) {what}: it holds no capacity now, and apply buys nothing in its place (remove the block, or rename it to buy another)",
            held.id
        ),
    });
}

/// The line of a reservation the state holds.
fn held_line(
    addr: &Address,
    prior: Option<&crate::state::ResourceState>,
    held: &crate::model::reservation::Reserved,
    action: ReservationAction,
) -> ReservationLine {
    let term_h = held.end_ms.map(|e| e.saturating_sub(held.start_ms) as f64 / 3_600_000.0);
    ReservationLine {
        address: addr.clone(),
        action,
        provider: prior.and_then(|p| p.provider.clone()).unwrap_or_default(),
        region: prior.and_then(|p| p.region.clone()).unwrap_or_default(),
        kind: held.kind,
        instance_type: held.instance_type.clone(),
        count: held.count,
        zone: held.zone.clone(),
        start_ms: Some(held.start_ms),
        end_ms: held.end_ms,
        commitment_usd: held.upfront_usd + term_h.map_or(0.0, |h| h * held.usd_per_hour),
        usd_per_hour: held.usd_per_hour,
        cancellable: held.cancellable(),
        used: 0,
        offering_id: None,
        reserved: Some(Box::new(held.clone())),
    }
}

/// A held reservation's attributes that changed, other than the guards: the cloud cannot
/// change a bought reservation, so the plan refuses instead of buying a second one.
fn check_in_place(addr: &Address, r: &Reservation, before: &serde_json::Value, out: &mut Planned) {
    let after = serde_json::to_value(r).unwrap_or_default();
    let (Some(b), Some(a)) = (before.as_object(), after.as_object()) else { return };
    let mut changed: Vec<&str> = a
        .keys()
        .chain(b.keys())
        .filter(|k| !IN_PLACE.contains(&k.as_str()) && a.get(*k) != b.get(*k))
        .map(String::as_str)
        .collect();
    changed.sort();
    changed.dedup();
    if changed.is_empty() {
        return;
    }
    out.errors.push(PlanError {
        address: addr.clone(),
        message: format!(
            "`{addr}` is already bought: its {} cannot change in place",
            changed.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
        ),
        hint: Some(format!(
            "put the attributes back to buy nothing, or rename the block to buy another reservation (removing `{addr}` cancels or forgets it)"
        )),
        location: None,
        span: Some(r.meta.span),
    });
}

/// The line of a reservation to buy, or an error at its block.
fn buy(addr: &Address, r: &Reservation, spec: &Spec, offers: Option<&Offers>, now_ms: u64, out: &mut Planned) {
    let provider = spec.providers.get(&r.provider.value);
    let region = r.region.as_ref().or_else(|| provider.and_then(|p| p.region.as_ref())).map(|s| s.value.clone());
    let Some(region) = region else {
        out.errors.push(error(addr, r, "names no region, and its provider has none", "add `region = \"...\"`"));
        return;
    };
    let mut line = ReservationLine {
        address: addr.clone(),
        action: ReservationAction::Buy,
        provider: r.provider.value.clone(),
        region,
        kind: r.kind.value,
        instance_type: r.instance_type.value.clone(),
        count: r.instance_count.value,
        zone: r.zone.value.clone(),
        start_ms: None,
        end_ms: None,
        commitment_usd: 0.0,
        usd_per_hour: 0.0,
        cancellable: r.kind.value.cancellable(),
        used: 0,
        offering_id: None,
        reserved: None,
    };
    match r.kind.value {
        ReservationKind::CapacityBlock => {
            let Some(offer) = choose(addr, r, offers, out) else { return };
            line.start_ms = Some(offer.start_ms);
            line.end_ms = Some(offer.end_ms);
            line.commitment_usd = offer.upfront_usd;
            line.zone = offer.zone.clone();
            line.offering_id = Some(offer.id.clone());
        }
        ReservationKind::OnDemand => {
            let cloud = provider.and_then(|p| p.kind.value).unwrap_or(crate::model::ProviderKind::Sim);
            let cny =
                provider.and_then(|p| p.cny_per_usd.as_ref()).map_or(crate::catalog::DEFAULT_CNY_PER_USD, |c| c.value);
            let hourly = crate::catalog::catalog()
                .instance_type(cloud, &r.instance_type.value)
                .map_or(0.0, |t| t.price_usd(cny) * f64::from(r.instance_count.value));
            let start = start_of(r).unwrap_or(now_ms).max(now_ms);
            line.start_ms = Some(start);
            line.end_ms = r.duration.as_ref().map(|d| start + u64::try_from(d.value.0.as_millis()).unwrap_or(u64::MAX));
            line.usd_per_hour = hourly;
            line.commitment_usd = r.duration.as_ref().map_or(0.0, |d| hourly * d.value.0.as_secs_f64() / 3600.0);
        }
    }
    out.lines.push(line);
}

/// The earliest offering within `max_price_usd`, or an error at the block saying why none.
fn choose<'o>(addr: &Address, r: &Reservation, offers: Option<&'o Offers>, out: &mut Planned) -> Option<&'o Offering> {
    let Some(offers) = offers else {
        out.errors.push(error(
            addr,
            r,
            "needs a Capacity Block offering, and this plan did not read any",
            "plan with refresh (drop `--refresh=false`) so gpuplan can list the offerings",
        ));
        return None;
    };
    let found = match offers.get(addr) {
        Some(Ok(list)) => list,
        Some(Err(why)) => {
            out.errors.push(error(addr, r, &format!("could not list Capacity Block offerings: {why}"), "try again"));
            return None;
        }
        None => return None,
    };
    let max = r.max_price_usd.as_ref().map(|m| m.value);
    // The earliest window within the price (capacity sooner), the cheaper of two alike.
    let best = found
        .iter()
        .filter(|o| max.is_none_or(|m| o.upfront_usd <= m))
        .min_by(|a, b| a.start_ms.cmp(&b.start_ms).then(a.upfront_usd.total_cmp(&b.upfront_usd)));
    if best.is_none() {
        let cheapest = found.iter().map(|o| o.upfront_usd).min_by(f64::total_cmp);
        let (message, hint) = match (cheapest, max) {
            (Some(c), Some(m)) => (
                format!(
                    "no Capacity Block offering within `max_price_usd` ({} USD): the cheapest is {} USD",
                    crate::model::money::usd(m),
                    crate::model::money::usd(c)
                ),
                "raise `max_price_usd`, or change the start, duration or count".to_string(),
            ),
            _ => (
                format!(
                    "no Capacity Block offering of {} × {} in {}",
                    r.instance_count.value, r.instance_type.value, r.zone.value
                ),
                "`gpuplan sim capacity-blocks` lists what the sim offers; try another start, zone or count".to_string(),
            ),
        };
        out.errors.push(error(addr, r, &message, &hint));
    }
    best
}

/// The block's `start`, in ms since the epoch.
pub fn start_of(r: &Reservation) -> Option<u64> {
    let t = humantime::parse_rfc3339_weak(&r.start.as_ref()?.value).ok()?;
    u64::try_from(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()
}

fn error(addr: &Address, r: &Reservation, message: &str, hint: &str) -> PlanError {
    PlanError {
        address: addr.clone(),
        message: format!("`{addr}` {message}"),
        hint: Some(hint.to_string()),
        location: None,
        span: Some(r.meta.span),
    }
}

/// Each reservation line's `used`: the nodes in it once the plan is applied (live nodes
/// tagged with its id that the plan keeps, and the batches it launches into it).
pub fn count_used<'n>(
    lines: &mut [ReservationLine],
    changes: &[crate::plan::ResourceChange],
    live: impl Iterator<Item = &'n crate::providers::Node>,
) {
    let tag = crate::providers::TAG_RESERVATION;
    let ids: Vec<Option<&str>> = lines.iter().map(|l| l.reserved.as_ref().map(|r| r.id.as_str())).collect();
    let mut used = vec![0u32; lines.len()];
    let deleted: std::collections::BTreeSet<&str> =
        changes.iter().filter_map(|c| c.pool.as_ref()).flat_map(|p| p.deletes.iter().map(|d| d.id.as_str())).collect();
    for n in live.filter(|n| n.is_live() && !deleted.contains(n.id.as_str())) {
        if let Some(i) = n.tags.get(tag).and_then(|id| ids.iter().position(|x| *x == Some(id))) {
            used[i] += 1;
        }
    }
    for b in changes.iter().filter_map(|c| c.pool.as_ref()).flat_map(|p| &p.creates) {
        if let Some(i) = b.reservation.as_ref().and_then(|r| ids.iter().position(|x| *x == Some(r.id.as_str()))) {
            used[i] += b.count;
        }
    }
    for (line, n) in lines.iter_mut().zip(used) {
        line.used = n;
    }
}
