//! Reservations in every view (docs/design/big-runs.md): what each commits (`commits
//! 28,450.00 USD up front, cannot be cancelled, ends 2027-01-17 00:00Z`) and what apply
//! does to it. Text and markdown read the same lines `plan --json` `reservations[]` carries.

use crate::model::reservation::{ReservationAction, ReservationLine, minute};
use crate::plan::model::Plan;

/// The terminal section, a blank line after; empty without reservations.
pub fn text(plan: &Plan) -> String {
    if plan.reservations.is_empty() {
        return String::new();
    }
    let mut out = String::from("Reservations:\n");
    for r in &plan.reservations {
        out += &format!("  {} {}: {}\n", verb(r.action), r.address, shape(r));
        out += &format!("      {}\n", status(r));
    }
    out.push('\n');
    out
}

/// The pull-request section: one row per reservation.
pub fn markdown(plan: &Plan) -> String {
    if plan.reservations.is_empty() {
        return String::new();
    }
    let mut out = String::from("**Reservations**\n\n| | reservation | what | commitment |\n|---|---|---|---|\n");
    for r in &plan.reservations {
        out += &format!("| {} | `{}` | {} | {} |\n", verb(r.action), r.address, shape(r), status(r));
    }
    out.push('\n');
    out
}

fn verb(a: ReservationAction) -> &'static str {
    match a {
        ReservationAction::Buy => "buy",
        ReservationAction::Keep => "keep",
        ReservationAction::Cancel => "cancel",
        ReservationAction::Forget => "forget",
        ReservationAction::Ended => "ended",
    }
}

/// What it commits; for one that has ended, what happened instead.
fn status(r: &ReservationLine) -> String {
    match r.reserved.as_ref().and_then(|h| h.ended()) {
        Some(what) => format!("{what}: holds no capacity"),
        None => r.commitment(),
    }
}

/// `capacity_block, 2 × p5.48xlarge in us-east-1a from 2027-01-10 00:00Z`.
fn shape(r: &ReservationLine) -> String {
    let from = r.start_ms.map(|s| format!(" from {}", minute(s))).unwrap_or_default();
    format!("{}, {} × {} in {}{from}", r.kind, r.count, r.instance_type, r.zone)
}
