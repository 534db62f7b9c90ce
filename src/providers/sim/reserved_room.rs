//! Launches into a sim reservation (docs/design/big-runs.md, `capacity {}`): what a
//! reservation lets a create place, at the sim clock, and a reservation's state as that
//! clock has moved it. Below both the node calls and the reservation calls.

use super::catalog_check::invalid;
use super::world::World;
use crate::catalog::InstanceType;
use crate::model::ProviderError;
use crate::model::reservation::{ReservationTarget, Reserved};
use crate::providers::{CreateNodes, ErrorClass, NodeState, TAG_RESERVATION};

/// For a create into a reservation: `types` narrowed to the reservation's, and the room
/// it has left (placed outside the zone's limit); `None` for a create on the open market.
pub(super) fn narrow(
    world: &World,
    req: &CreateNodes,
    types: &mut Vec<&InstanceType>,
) -> Result<Option<u32>, ProviderError> {
    let Some(target) = &req.reservation else { return Ok(None) };
    let (ty, room) = reserved_room(world, req, target)?;
    types.retain(|t| t.name == ty);
    Ok(Some(room))
}

/// The instance type reservation `target` holds and the room it has left for `req`'s
/// launch, at the sim clock: it must exist in the region, be active (a Capacity Block's
/// window open), and hold the zone and one of the types the launch allows.
pub(super) fn reserved_room(
    world: &World,
    req: &CreateNodes,
    target: &ReservationTarget,
) -> Result<(String, u32), ProviderError> {
    let id = &target.id;
    let r = world
        .reservations
        .get(id)
        .filter(|r| r.region == req.region)
        .ok_or_else(|| invalid("SimReservationNotFound", format!("no reservation `{id}` in `{}`", req.region)))?;
    let r = with_clock(&r.reserved, world.now_ms());
    if r.state != "active" {
        return Err(invalid(
            "SimReservationNotActive",
            format!("reservation `{id}` is {}: it takes no instances now", r.state),
        ));
    }
    if r.zone != req.zone || !req.instance_types.contains(&r.instance_type) {
        return Err(invalid(
            "SimReservationMismatch",
            format!(
                "reservation `{id}` holds {} in {}, not what this launch asks in {}",
                r.instance_type, r.zone, req.zone
            ),
        ));
    }
    let live = |s: NodeState| matches!(s, NodeState::Pending | NodeState::Running);
    let used =
        world.nodes.values().filter(|n| live(n.state) && n.tags.get(TAG_RESERVATION) == Some(id.as_str())).count();
    Ok((r.instance_type.clone(), r.count.saturating_sub(u32::try_from(used).unwrap_or(u32::MAX))))
}

/// A launch into a reservation that had room for fewer nodes than it asked.
pub(super) fn reservation_full(req: &CreateNodes, id: &str, placed: usize) -> ProviderError {
    ProviderError::new(
        ErrorClass::OutOfCapacity,
        "SimReservationCapacityExceeded",
        format!("reservation `{id}` is full: placed {placed} of {} nodes", req.count),
    )
}

/// The live managed nodes in a Capacity Block whose window has closed at the sim clock.
pub(super) fn window_closed(world: &World) -> Vec<String> {
    let now = world.now_ms();
    let closed = |id: &str| {
        world.reservations.get(id).is_some_and(|r| {
            r.reserved.kind == crate::model::reservation::ReservationKind::CapacityBlock
                && r.reserved.end_ms.is_some_and(|end| end <= now)
        })
    };
    world
        .nodes
        .values()
        .filter(|n| n.is_live() && n.is_managed() && n.tags.get(TAG_RESERVATION).is_some_and(closed))
        .map(|n| n.id.clone())
        .collect()
}

/// A reservation's state as the sim clock has moved it: a block is `scheduled` until its
/// window opens, `active` in it, `expired` after.
pub(super) fn with_clock(r: &Reserved, now: u64) -> Reserved {
    let mut r = r.clone();
    if r.state != "cancelled" {
        r.state = match r.end_ms {
            Some(end) if now >= end => "expired",
            _ if now < r.start_ms => "scheduled",
            _ => "active",
        }
        .into();
    }
    r
}
