//! Reserved capacity as plain data (docs/design/big-runs.md): the kinds of reservation,
//! a Capacity Block offering a cloud sells, and a reservation a cloud holds. The spec
//! asks for one, the providers buy, list and cancel them, the plan shows what each
//! commits and the state records what was bought.

use serde::{Deserialize, Serialize};

/// What kind of reserved capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReservationKind {
    /// An On-Demand Capacity Reservation (AWS ODCR, Alibaba's capacity reservation):
    /// billed at the on-demand rate while it lasts, cancellable at any time.
    OnDemand,
    /// An EC2 Capacity Block for ML: a fixed window, paid up front, not cancellable.
    CapacityBlock,
}

impl ReservationKind {
    pub const ALL: [(&'static str, ReservationKind); 2] =
        [("on_demand", ReservationKind::OnDemand), ("capacity_block", ReservationKind::CapacityBlock)];

    pub fn as_str(self) -> &'static str {
        match self {
            ReservationKind::OnDemand => "on_demand",
            ReservationKind::CapacityBlock => "capacity_block",
        }
    }

    /// Can the cloud give it back (and stop billing)?
    pub fn cancellable(self) -> bool {
        self == ReservationKind::OnDemand
    }
}

impl std::fmt::Display for ReservationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to look for among Capacity Block offerings.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferingQuery {
    pub instance_type: String,
    pub count: u32,
    /// The earliest start (ms since the epoch).
    pub start_ms: u64,
    /// The window's length in whole hours.
    pub hours: u32,
    /// Only offerings in this zone, when set.
    pub zone: Option<String>,
}

/// One Capacity Block a cloud offers: a window, paid up front.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Offering {
    /// The cloud's offering id (`cbr-…` on AWS), what a purchase names.
    pub id: String,
    pub instance_type: String,
    pub count: u32,
    pub zone: String,
    pub start_ms: u64,
    pub end_ms: u64,
    /// The whole window's price, paid at purchase.
    pub upfront_usd: f64,
}

/// How to buy one reservation: an offering (Capacity Block) or a new On-Demand
/// Capacity Reservation, with the idempotency token of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct ReserveRequest {
    pub kind: ReservationKind,
    pub instance_type: String,
    pub count: u32,
    pub zone: String,
    /// The offering a Capacity Block buys.
    pub offering_id: Option<String>,
    /// When an On-Demand reservation ends on its own (ms since the epoch); `None`: until
    /// cancelled.
    pub end_ms: Option<u64>,
    /// The address it is bought for, tagged on it like a pool's nodes.
    pub address: String,
    pub token: String,
}

/// One reservation a cloud holds, as gpuplan records it in state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reserved {
    /// The cloud's id (`cr-…`).
    pub id: String,
    pub kind: ReservationKind,
    pub instance_type: String,
    pub count: u32,
    pub zone: String,
    pub start_ms: u64,
    /// When it ends; `None`: until cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
    /// Paid up front (a Capacity Block's price); 0 for one billed by the hour.
    #[serde(default)]
    pub upfront_usd: f64,
    /// Billed per hour while it lasts, used or not (an On-Demand reservation).
    #[serde(default)]
    pub usd_per_hour: f64,
    /// `active`, `scheduled`, `cancelled`, `expired` as the cloud says it.
    pub state: String,
}

impl Reserved {
    pub fn cancellable(&self) -> bool {
        self.kind.cancellable()
    }
    /// A Capacity Block's node-hour at its prepaid rate: its up-front price over its
    /// instances and hours; `None` for an On-Demand reservation (its nodes cost the
    /// on-demand price, which is what it commits) or a block without a window.
    pub fn prepaid_per_node_hour(&self) -> Option<f64> {
        let hours = self.end_ms?.saturating_sub(self.start_ms) as f64 / 3_600_000.0;
        (self.kind == ReservationKind::CapacityBlock && hours > 0.0 && self.count > 0)
            .then(|| self.upfront_usd / (f64::from(self.count) * hours))
    }

    /// Still holding (or about to hold) capacity.
    pub fn is_live(&self) -> bool {
        matches!(self.state.as_str(), "active" | "scheduled" | "pending" | "payment-pending" | "assessing" | "delayed")
    }

    /// What happened to a reservation that holds no capacity any more, as the plan says
    /// it: `expired 2027-01-17 00:00Z`, `cancelled outside gpuplan`; `None` while live.
    pub fn ended(&self) -> Option<String> {
        if self.is_live() {
            return None;
        }
        Some(match (self.state.as_str(), self.end_ms) {
            ("expired", Some(end)) => format!("expired {}", minute(end)),
            ("expired", None) => "expired".to_string(),
            ("cancelled", _) => "cancelled outside gpuplan".to_string(),
            (GONE, _) => "no longer known to the cloud".to_string(),
            (other, _) => format!("{other} (as the cloud says it)"),
        })
    }
}

/// The state gpuplan records for a reservation the cloud no longer lists.
pub const GONE: &str = "gone";

/// The reservation a batch of nodes launches into (docs/design/big-runs.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReservationTarget {
    /// The cloud's id (`cr-…`).
    pub id: String,
    pub kind: ReservationKind,
    /// The `reservation` block it was bought for (`reservation.h100_block`).
    pub address: String,
}

/// A time as the plan prints a reservation's window: `2027-01-17 00:00Z`.
pub fn minute(ms: u64) -> String {
    let t = crate::model::time::rfc3339_ms(ms);
    // `2027-01-17T00:00:00Z` → `2027-01-17 00:00Z`
    match (t.get(..10), t.get(11..16)) {
        (Some(day), Some(hm)) => format!("{day} {hm}Z"),
        _ => t,
    }
}

/// What a plan does to one reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReservationAction {
    /// Bought by this apply.
    Buy,
    /// Held as bought; nothing to do.
    Keep,
    /// Cancelled by this apply (it stops billing).
    Cancel,
    /// Forgotten by this apply: it cannot be cancelled, so it stays paid until it ends
    /// (or it has ended already: there is nothing to cancel).
    Forget,
    /// Ended outside this plan (expired, cancelled, gone from the cloud, as refresh read
    /// it): it holds no capacity; apply records what happened and buys nothing.
    Ended,
}

/// One reservation in a plan: what it commits, and what apply does to it
/// (`plan --json` `reservations[]`; policies read them as `plan.reservations`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReservationLine {
    pub address: crate::addr::Address,
    pub action: ReservationAction,
    /// The provider block's local name.
    pub provider: String,
    pub region: String,
    pub kind: ReservationKind,
    pub instance_type: String,
    pub count: u32,
    pub zone: String,
    /// The window (ms since the epoch); an On-Demand reservation bought now starts when
    /// apply buys it and may have no end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
    /// What it commits: a Capacity Block's up-front price; an On-Demand reservation's
    /// hourly rate over its term (0 when it has no end: see `usd_per_hour`).
    pub commitment_usd: f64,
    /// An On-Demand reservation's rate, billed used or not.
    #[serde(default)]
    pub usd_per_hour: f64,
    pub cancellable: bool,
    /// Nodes of pools running in it (0 until pools use reserved capacity).
    #[serde(default)]
    pub used: u32,
    /// The offering a Capacity Block purchase names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offering_id: Option<String>,
    /// The reservation as bought (in state), for the ones already held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<Box<Reserved>>,
}

impl ReservationLine {
    /// The line as `plan --json` `reservations[]` and policies' `plan.reservations` show it:
    /// `{address, action, kind, instance_type, count, zone, start, end, commitment_usd,
    /// usd_per_hour, cancellable, used, state}` (`start`/`end` RFC 3339 or `null`; `state`
    /// the cloud's, as refresh last read it, `null` for one to buy).
    pub fn doc(&self) -> serde_json::Value {
        let at = |ms: Option<u64>| ms.map(crate::model::time::rfc3339_ms);
        serde_json::json!({
            "address": self.address.to_string(),
            "action": self.action,
            "kind": self.kind,
            "instance_type": self.instance_type,
            "count": self.count,
            "zone": self.zone,
            "start": at(self.start_ms),
            "end": at(self.end_ms),
            "commitment_usd": self.commitment_usd,
            "usd_per_hour": self.usd_per_hour,
            "cancellable": self.cancellable,
            "used": self.used,
            "state": self.reserved.as_ref().map(|r| r.state.as_str()),
        })
    }

    /// What it commits, as the plan says it:
    /// `commits 28,450.00 USD up front, cannot be cancelled, ends 2027-01-17 00:00Z`.
    pub fn commitment(&self) -> String {
        use crate::model::money::usd;
        let ends = match self.end_ms {
            Some(end) => format!("ends {}", minute(end)),
            None => "until cancelled".to_string(),
        };
        match self.kind {
            ReservationKind::CapacityBlock => {
                format!("commits {} USD up front, cannot be cancelled, {ends}", usd(self.commitment_usd))
            }
            ReservationKind::OnDemand if self.end_ms.is_some() && self.commitment_usd > 0.0 => format!(
                "commits {} USD ({} USD/h, used or not), cancellable, {ends}",
                usd(self.commitment_usd),
                usd(self.usd_per_hour)
            ),
            ReservationKind::OnDemand => {
                format!("commits {} USD/h, used or not, cancellable, {ends}", usd(self.usd_per_hour))
            }
        }
    }
}
