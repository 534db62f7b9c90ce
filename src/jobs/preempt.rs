//! Preemption, the last phase of placing jobs: a job still waiting for capacity or
//! priority after admission takes the GPUs of running preemptible jobs of strictly lower
//! priority on its pool. Pure.

use std::collections::BTreeMap;

use super::demand::PlaceInput;
use super::launch::launch;
use super::model::{JobPlacement, Placement, WaitCode};
use crate::addr::Address;
use crate::plan::shape::PoolShape;
use crate::providers::Capacity;

/// A running replica another job may preempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Victim {
    pub job: Address,
    pub priority: crate::spec::model::Priority,
    /// When the job was first seen (RFC 3339); `None`: new, the youngest.
    pub first_seen: Option<String>,
    pub run_id: String,
    pub node: String,
    pub gpus: u32,
    pub capacity: Capacity,
}

/// The runs to stop so that `replicas` replicas of `need` GPUs each fit on the nodes they
/// free: lowest priority first, then the youngest job, then by run id. Only victims on
/// the nodes the replicas get are kept. Returns them and each replica's capacity, or
/// `None` when stopping every candidate would not make room. Pure.
pub fn choose_victims(mut candidates: Vec<Victim>, need: u32, replicas: usize) -> Option<(Vec<Victim>, Vec<Capacity>)> {
    if need == 0 || replicas == 0 {
        return None;
    }
    candidates.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| match (&a.first_seen, &b.first_seen) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (Some(x), Some(y)) => y.cmp(x),
            })
            .then_with(|| a.run_id.cmp(&b.run_id))
    });
    let mut freed: Vec<(String, u32, Capacity)> = Vec::new();
    let mut chosen: Vec<Victim> = Vec::new();
    for c in candidates {
        match freed.iter_mut().find(|(n, _, _)| *n == c.node) {
            Some(slot) => slot.1 += c.gpus,
            None => freed.push((c.node.clone(), c.gpus, c.capacity)),
        }
        chosen.push(c);
        let slots: Vec<(&str, Capacity)> = freed
            .iter()
            .flat_map(|(n, g, cap)| std::iter::repeat_n((n.as_str(), *cap), (*g / need) as usize))
            .take(replicas)
            .collect();
        if slots.len() == replicas {
            let nodes: Vec<&str> = slots.iter().map(|(n, _)| *n).collect();
            let caps = slots.iter().map(|(_, c)| *c).collect();
            let kept = chosen.iter().filter(|v| nodes.contains(&v.node.as_str())).cloned().collect();
            return Some((kept, caps));
        }
    }
    None
}

/// Preemption: a job that waits for capacity or priority takes the GPUs of running
/// preemptible jobs of strictly lower priority on its pool ([`choose_victims`]); the
/// victims' placement becomes `Preempt` (apply stops those runs first) and the job is
/// launched on the capacity they free.
pub(super) fn preempt(
    input: &PlaceInput<'_>,
    shapes: &BTreeMap<&Address, PoolShape>,
    order: &[Address],
    pending: &BTreeMap<Address, Vec<(u32, u32)>>,
    out: &mut BTreeMap<Address, JobPlacement>,
) {
    let spec = input.spec;
    // The running preemptible jobs of each pool, once: a waiting job looks only at its
    // pool's, so many waiting jobs on a large fleet stay linear.
    let mut preemptible: BTreeMap<Address, Vec<Address>> = BTreeMap::new();
    for v in out.values().filter(|v| v.preemptible && v.placement == Placement::Running) {
        preemptible.entry(v.pool.clone()).or_default().push(v.address.clone());
    }
    for addr in order {
        let Some(w) = out.get(addr) else { continue };
        let waits_for_room = w.placement == Placement::Waiting
            && matches!(w.reason.as_ref().map(|r| r.code), Some(WaitCode::Capacity | WaitCode::Priority));
        let Some(want) = pending.get(addr).filter(|_| waits_for_room) else { continue };
        let (pool, priority, need) = (w.pool.clone(), w.priority, w.gpus_per_replica);
        let Some(on_pool) = preemptible.get(&pool) else { continue };
        let candidates: Vec<Victim> = on_pool
            .iter()
            .filter_map(|a| out.get(a))
            .filter(|v| v.priority > priority)
            .filter(|v| matches!(v.placement, Placement::Running | Placement::Preempt))
            .flat_map(|v| {
                v.runs.iter().filter(|r| r.is_active() && !v.preempt.contains(&r.id)).map(move |r| Victim {
                    job: v.address.clone(),
                    priority: v.priority,
                    first_seen: v.first_seen.clone(),
                    run_id: r.id.clone(),
                    node: r.node_id.clone(),
                    gpus: r.gpus,
                    capacity: r.capacity,
                })
            })
            .collect();
        let Some((victims, caps)) = choose_victims(candidates, need, want.len()) else { continue };
        let (Some(job), Some(shape)) = (spec.jobs.get(addr), shapes.get(&pool)) else { continue };
        let mut job = job.clone();
        job.pool.value = pool.clone();
        let job = &job;
        let Some(t) = spec.job_templates.get(&job.template.value) else { continue };
        let fallback = spec.gpu_pools.get(&pool).map(|p| p.mix.fallback.value);
        for v in &victims {
            if let Some(vj) = out.get_mut(&v.job) {
                vj.placement = Placement::Preempt;
                vj.preempt.push(v.run_id.clone());
                vj.preempted_for = Some(addr.clone());
            }
        }
        let Some(jp) = out.get_mut(addr) else { continue };
        jp.placement = Placement::Launch;
        jp.reason = None;
        for ((replica, attempt), cap) in want.iter().zip(&caps) {
            jp.launches.push(launch(input, addr, job, t, shape, *replica, *attempt, *cap, fallback));
        }
        jp.capacity.extend(caps);
        jp.capacity.sort();
    }
}
