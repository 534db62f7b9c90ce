//! Least disruption: which of the layouts a pool's shape allows its live nodes move to.
//! Pure; it counts, it never picks nodes (`plan/pool/nodes.rs` does).
//!
//! The shape fixes how many nodes are on-demand and how many spot ([`shape::split`]) and
//! asks for an even spread: per capacity type, and in total, no zone holds more than one
//! node over another. [`shape::layout`] is one such layout, the same for every fleet.
//! Often several are as even: one spot node in us-east-1a and on-demand nodes in 1b and 1c
//! is as spread as on-demand nodes in 1a and 1b and spot in 1c. [`layout`] takes, among
//! them all, the one that keeps the most live nodes, so a change the shape can reach by
//! adding nodes never terminates one; of those, the one that keeps busy nodes, then the
//! one closest to [`shape::layout`] (a pool without nodes gets exactly that), then the
//! one with its extra nodes in the first zones.
//!
//! Every allowed layout gives each zone `od / z` or one more on-demand node and `spot / z`
//! or one more spot node. With `r` zones getting the extra on-demand node and `s` the
//! extra spot one, the totals stay within one exactly when no zone gets both while
//! `r + s < z`, and every zone gets one while `r + s > z` (`r + s = z`: both hold). A
//! dynamic program over the zones and the extras left to hand out finds the best
//! assignment in `z · (r + 1) · (s + 1)` steps.

use std::collections::BTreeMap;

use crate::plan::shape::{self, PoolShape};
use crate::providers::Capacity;

/// What keeping one node is worth, compared as a whole (lexicographically):
/// `[1, not idle, runs a job that is not preemptible, runs a job]`. Keeping more nodes
/// always wins; among as many kept, the busier ones.
pub type Worth = [u32; 4];

/// A layout's worth: the sum of its kept nodes' [`Worth`], then how many of its buckets
/// hold what [`shape::layout`] holds there (the tie-break).
type Score = [u32; 5];

/// Each bucket's live nodes by their [`Worth`] (any order), keyed as [`shape::layout`]
/// keys buckets. Nodes in no bucket of the layout (a zone the pool no longer allows) go
/// whatever the layout, so they need not be listed.
pub type Have<'a> = BTreeMap<(&'a str, Capacity), Vec<Worth>>;

/// Desired (zone, capacity) → count, as [`shape::layout`] returns it.
pub type Layout = Vec<(String, Capacity, u32)>;

/// The layout for `n` nodes (as [`shape::layout`] returns one) that keeps the most of
/// `have`, then the busiest of them, then stays closest to [`shape::layout`].
pub fn layout(shape: &PoolShape, n: u32, on_demand_base: u32, spot_percent: u32, have: &Have<'_>) -> Layout {
    let canonical = shape::layout(shape, n, on_demand_base, spot_percent);
    let z = shape.zones.len();
    let distinct = shape.zones.iter().enumerate().all(|(i, zone)| !shape.zones[..i].contains(zone));
    // One bucket per capacity type (EC2 places across zones), or the usual layout keeps
    // every node already (a pool that does not change): the only layout, or the best.
    let counts = have.iter().map(|(bucket, nodes)| (*bucket, nodes.len()));
    // A pool with reserved capacity keeps the one layout: its reserved zone is fixed.
    let reserved = shape.reserved.is_some();
    if reserved || shape.provider_places_zones() || z == 0 || !distinct || keeps_all(&canonical, counts) {
        return canonical;
    }
    let (od, spot) = shape::split(n, on_demand_base, spot_percent);
    let floor = [od / z as u32, spot / z as u32];
    let extra = [od as usize % z, spot as usize % z];
    let want = |zone: &str, cap: Capacity| canonical.iter().find(|(z, c, _)| z == zone && *c == cap).map_or(0, |b| b.2);
    // Each zone's score with each choice of extras, `[on-demand][spot]`.
    let options: Vec<[[Score; 2]; 2]> = shape
        .zones
        .iter()
        .map(|zone| {
            let [od_nodes, spot_nodes] = [Capacity::OnDemand, Capacity::Spot].map(|cap| worthiest(have, zone, cap));
            let bucket = |cap: Capacity, nodes: &[Worth], count: u32| {
                let mut s = nodes.iter().take(count as usize).fold([0; 5], |s, w| plus(s, [w[0], w[1], w[2], w[3], 0]));
                s[4] = u32::from(count == want(zone, cap));
                s
            };
            let both = |x: u32, y: u32| {
                plus(
                    bucket(Capacity::OnDemand, &od_nodes, floor[0] + x),
                    bucket(Capacity::Spot, &spot_nodes, floor[1] + y),
                )
            };
            [[both(0, 0), both(0, 1)], [both(1, 0), both(1, 1)]]
        })
        .collect();
    let Some(extras) = assign(&options, extra) else { return canonical };
    let mut out = Vec::with_capacity(2 * z);
    for (zone, [x, y]) in shape.zones.iter().zip(extras) {
        out.push((zone.clone(), Capacity::OnDemand, floor[0] + x));
        out.push((zone.clone(), Capacity::Spot, floor[1] + y));
    }
    out
}

/// Does `layout` keep every node, given each bucket's count? A node in no bucket of the
/// layout goes.
pub fn keeps_all<'a>(
    layout: &[(String, Capacity, u32)],
    mut counts: impl Iterator<Item = ((&'a str, Capacity), usize)>,
) -> bool {
    counts.all(|((zone, cap), k)| {
        k == 0 || layout.iter().any(|(z, c, want)| z == zone && *c == cap && k <= *want as usize)
    })
}

/// A bucket's nodes, worthiest first: keeping `k` of them keeps the first `k`.
fn worthiest(have: &Have<'_>, zone: &str, cap: Capacity) -> Vec<Worth> {
    let mut nodes = have.get(&(zone, cap)).cloned().unwrap_or_default();
    nodes.sort_unstable_by(|a, b| b.cmp(a));
    nodes
}

fn plus(a: Score, b: Score) -> Score {
    std::array::from_fn(|i| a[i] + b[i])
}

/// Which zones get the extra on-demand node and which the extra spot one (`[x, y]` per
/// zone), `extra[0]` and `extra[1]` of them, with the zones' totals within one, for the
/// best sum of `options`; among equals, extras go to the first zones, on-demand before
/// spot, as in [`shape::spread`]. `None` only if no assignment exists (never for a split).
fn assign(options: &[[[Score; 2]; 2]], extra: [usize; 2]) -> Option<Vec<[u32; 2]>> {
    let (z, [r, s]) = (options.len(), extra);
    // Neither or one extra per zone, one or both, or exactly one (see the module's notes).
    let (at_most_one, at_least_one) = (r + s <= z, r + s >= z);
    let choices = move |u: usize, v: usize| {
        [[1, 1], [1, 0], [0, 1], [0, 0]].into_iter().filter(move |&[x, y]| {
            let both = x + y;
            (!at_most_one || both <= 1) && (!at_least_one || both >= 1) && x <= u && y <= v
        })
    };
    let at = |u: usize, v: usize| u * (s + 1) + v;
    // best[i][at(u, v)]: the best score of zones i.. handing out u and v extras.
    let mut best: Vec<Vec<Option<Score>>> = vec![vec![None; (r + 1) * (s + 1)]; z + 1];
    best[z][at(0, 0)] = Some([0; 5]);
    let with = |best: &[Vec<Option<Score>>], i: usize, u: usize, v: usize, [x, y]: [usize; 2]| {
        best[i + 1][at(u - x, v - y)].map(|rest| plus(rest, options[i][x][y]))
    };
    for i in (0..z).rev() {
        for (u, v) in (0..=r).flat_map(|u| (0..=s).map(move |v| (u, v))) {
            best[i][at(u, v)] = choices(u, v).filter_map(|c| with(&best, i, u, v, c)).max();
        }
    }
    let (mut u, mut v) = (r, s);
    let mut out = Vec::with_capacity(z);
    for i in 0..z {
        let goal = best[i][at(u, v)]?;
        let [x, y] = choices(u, v).find(|&c| with(&best, i, u, v, c) == Some(goal))?;
        out.push([x as u32, y as u32]);
        (u, v) = (u - x, v - y);
    }
    Some(out)
}

#[cfg(test)]
mod tests;
