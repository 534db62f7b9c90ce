//! Reserved capacity in the sim cloud: On-Demand Capacity Reservations (cancellable,
//! billed at the on-demand rate) and Capacity Block offerings (fixed windows, paid up
//! front, not cancellable), so that reservations plan, apply and destroy offline.
//!
//! Offerings are a pure function of the query and the sim clock ([`offerings`]): each
//! zone that sells the instance type offers windows starting at the next three UTC
//! midnights at or after the earliest start, priced at a discount from the on-demand
//! rate that varies by zone and calendar day. An offering's id names its zone, start and length,
//! so a purchase finds the same offering again.

use async_trait::async_trait;

use super::catalog_check::{invalid, placeable};
use super::cloud::SimCloud;
use super::provider::SimProvider;
use super::reserved_room::with_clock;
use super::world::{Change, SimReservation};
use crate::catalog::{DEFAULT_CNY_PER_USD, catalog};
use crate::model::ProviderError;
use crate::model::reservation::{Offering, OfferingQuery, ReservationKind, ReserveRequest, Reserved};
use crate::providers::reservations::ReservationPort;
use crate::spec::model::ProviderKind;

const DAY_MS: u64 = 86_400_000;
const HOUR_MS: u64 = 3_600_000;
/// Windows offered per zone: starting at each of the next this many midnights.
const STARTS: u64 = 3;
/// The most instances one Capacity Block holds (as on EC2).
pub const MAX_BLOCK_COUNT: u32 = 64;

/// The offerings for `q` in `region` at sim time `now_ms`, cheapest first.
pub fn offerings(region: &str, q: &OfferingQuery, now_ms: u64) -> Result<Vec<Offering>, ProviderError> {
    if q.count == 0 || q.count > MAX_BLOCK_COUNT {
        return Err(invalid(
            "SimInvalidParameter",
            format!("a Capacity Block holds 1 to {MAX_BLOCK_COUNT} instances, not {}", q.count),
        ));
    }
    if q.hours == 0 || !q.hours.is_multiple_of(24) {
        return Err(invalid("SimInvalidParameter", format!("a Capacity Block lasts whole days, not {}h", q.hours)));
    }
    let t = catalog()
        .instance_type(ProviderKind::Sim, &q.instance_type)
        .ok_or_else(|| invalid("SimUnknownInstanceType", format!("unknown instance type `{}`", q.instance_type)))?;
    let zones: Vec<String> = match &q.zone {
        Some(z) => {
            placeable(region, z, std::slice::from_ref(&q.instance_type))?;
            vec![z.clone()]
        }
        None => catalog()
            .regions(ProviderKind::Sim)
            .into_iter()
            .filter(|r| r.name == region)
            .flat_map(|r| t.zones_in(r).into_iter().map(String::from).collect::<Vec<_>>())
            .collect(),
    };
    let first = q.start_ms.max(now_ms).div_ceil(DAY_MS) * DAY_MS;
    let hourly = t.price_usd(DEFAULT_CNY_PER_USD) * f64::from(q.count);
    let mut out = Vec::new();
    for zone in &zones {
        let zone_mix: u64 = zone.bytes().map(u64::from).sum();
        for day in 0..STARTS {
            let start_ms = first + day * DAY_MS;
            // 40 to 50 percent below on-demand, by zone and calendar day: the same window
            // has the same price whoever asks and from whichever earliest start.
            let discount = 0.40 + 0.05 * ((zone_mix + start_ms / DAY_MS) % 3) as f64;
            let upfront = (hourly * f64::from(q.hours) * (1.0 - discount) * 100.0).round() / 100.0;
            out.push(Offering {
                id: offering_id(zone, start_ms, q.hours),
                instance_type: q.instance_type.clone(),
                count: q.count,
                zone: zone.clone(),
                start_ms,
                end_ms: start_ms + u64::from(q.hours) * HOUR_MS,
                upfront_usd: upfront,
            });
        }
    }
    out.sort_by(|a, b| a.upfront_usd.total_cmp(&b.upfront_usd).then(a.start_ms.cmp(&b.start_ms)));
    Ok(out)
}

fn offering_id(zone: &str, start_ms: u64, hours: u32) -> String {
    format!("cbo-{zone}-{}-{hours}h", start_ms / 1000)
}

/// The zone, start and hours an offering id names.
fn parse_offering(id: &str) -> Option<(String, u64, u32)> {
    let rest = id.strip_prefix("cbo-")?;
    let (rest, hours) = rest.rsplit_once('-')?;
    let (zone, start) = rest.rsplit_once('-')?;
    Some((zone.to_string(), start.parse::<u64>().ok()? * 1000, hours.strip_suffix('h')?.parse().ok()?))
}

impl SimCloud {
    fn api_reserve(&self, region: &str, req: &ReserveRequest) -> Result<Reserved, ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, "reserve")?;
        if let Some(r) = inner.world.reservations.values().find(|r| r.token == req.token) {
            return Ok(r.reserved.clone());
        }
        let now = inner.world.now_ms();
        let types = placeable(region, &req.zone, std::slice::from_ref(&req.instance_type))?;
        let reserved = match req.kind {
            ReservationKind::CapacityBlock => {
                let id = req.offering_id.as_deref().unwrap_or_default();
                let bad = || invalid("SimOfferingNotFound", format!("no Capacity Block offering `{id}`"));
                let (zone, start_ms, hours) = parse_offering(id).ok_or_else(bad)?;
                let q = OfferingQuery {
                    instance_type: req.instance_type.clone(),
                    count: req.count,
                    start_ms,
                    hours,
                    zone: Some(zone),
                };
                let o = offerings(region, &q, now)?.into_iter().find(|o| o.id == id).ok_or_else(bad)?;
                Reserved {
                    id: String::new(),
                    kind: req.kind,
                    instance_type: o.instance_type,
                    count: o.count,
                    zone: o.zone,
                    start_ms: o.start_ms,
                    end_ms: Some(o.end_ms),
                    upfront_usd: o.upfront_usd,
                    usd_per_hour: 0.0,
                    state: "scheduled".into(),
                }
            }
            ReservationKind::OnDemand => Reserved {
                id: String::new(),
                kind: req.kind,
                instance_type: req.instance_type.clone(),
                count: req.count,
                zone: req.zone.clone(),
                start_ms: now,
                end_ms: req.end_ms,
                upfront_usd: 0.0,
                usd_per_hour: types[0].price_usd(DEFAULT_CNY_PER_USD) * f64::from(req.count),
                state: "active".into(),
            },
        };
        let mut next = inner.world.counter;
        let id = inner.next_id("cr-", self.config.seed, &mut next);
        let reserved = Reserved { id, ..reserved };
        let record = SimReservation {
            reserved: reserved.clone(),
            region: region.to_string(),
            token: req.token.clone(),
            address: req.address.clone(),
        };
        inner.commit(vec![Change::Counter { next }, Change::Reservation { reservation: record }])?;
        Ok(reserved)
    }

    fn api_describe_reservations(&self, region: &str, ids: &[String]) -> Result<Vec<Reserved>, ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, "describe_reservations")?;
        let now = inner.world.now_ms();
        Ok(ids
            .iter()
            .filter_map(|id| inner.world.reservations.get(id))
            .filter(|r| r.region == region)
            .map(|r| with_clock(&r.reserved, now))
            .collect())
    }

    fn api_cancel_reservation(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, "cancel_reservation")?;
        let Some(r) = inner.world.reservations.get(id).filter(|r| r.region == region) else {
            return Err(invalid("SimReservationNotFound", format!("no reservation `{id}` in `{region}`")));
        };
        if !r.reserved.cancellable() {
            return Err(invalid(
                "SimReservationNotCancellable",
                format!("`{id}` is a Capacity Block: it cannot be cancelled"),
            ));
        }
        if r.reserved.state == "cancelled" {
            return Ok(());
        }
        let mut r = r.clone();
        r.reserved.state = "cancelled".into();
        inner.commit(vec![Change::Reservation { reservation: r }])?;
        Ok(())
    }
}

#[async_trait]
impl ReservationPort for SimProvider {
    async fn capacity_block_offerings(&self, region: &str, q: &OfferingQuery) -> Result<Vec<Offering>, ProviderError> {
        let now = self.cloud().now_ms();
        offerings(region, q, now)
    }

    async fn reserve(&self, region: &str, req: &ReserveRequest) -> Result<Reserved, ProviderError> {
        self.cloud().api_reserve(region, req)
    }

    async fn describe_reservations(&self, region: &str, ids: &[String]) -> Result<Vec<Reserved>, ProviderError> {
        self.cloud().api_describe_reservations(region, ids)
    }

    async fn cancel_reservation(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.cloud().api_cancel_reservation(region, id)
    }
}
