//! What `import`, `moved` and `removed` ask of the sim cloud: describe instances by id,
//! list the unmanaged ones, retag in place; and `gpuplan sim launch`, which makes
//! unmanaged instances to try them on. Tagging changes tags only: a node's state,
//! launch time and jobs stay as they are.

use super::catalog_check::{invalid, placeable};
use super::cloud::SimCloud;
use super::error::SimError;
use super::world::{Change, SimNode};
use crate::addr::Address;
use crate::catalog::catalog;
use crate::model::ProviderKind;
use crate::providers::{Capacity, Node, NodeState, ProviderError, TAG_ADDRESS, Tags};

/// Most ids one describe or tag call takes (as EC2's tag calls).
pub const TAG_BATCH: usize = 1_000;

impl SimCloud {
    /// The nodes among `ids` in `region` that have not been terminated.
    pub(super) fn api_describe(&self, region: &str, ids: &[String]) -> Result<Vec<Node>, ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, "describe_nodes")?;
        super::catalog_check::check_region(region)?;
        Ok(ids
            .iter()
            .filter_map(|id| inner.world.nodes.get(id))
            .filter(|n| n.region == region && n.state != NodeState::Terminated)
            .map(SimNode::to_node)
            .collect())
    }

    /// Live nodes of `region` without `gpuplan:managed=true` whose tags hold every filter.
    pub(super) fn api_list_unmanaged(
        &self,
        region: &str,
        filters: &[(String, String)],
    ) -> Result<Vec<Node>, ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, "list_unmanaged")?;
        super::catalog_check::check_region(region)?;
        Ok(inner
            .world
            .nodes
            .values()
            .filter(|n| n.region == region && n.is_live() && !n.is_managed())
            .filter(|n| filters.iter().all(|(k, v)| n.tags.get(k) == Some(v.as_str())))
            .map(SimNode::to_node)
            .collect())
    }

    /// One tag call of at most [`TAG_BATCH`] ids: all or nothing. An id that does not
    /// exist in `region` fails the call before anything changes.
    pub(super) fn api_tag(
        &self,
        region: &str,
        ids: &[String],
        set: &Tags,
        remove: &[String],
    ) -> Result<(), ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, "tag_nodes")?;
        if ids.len() > TAG_BATCH {
            return Err(invalid("SimTooManyIds", format!("at most {TAG_BATCH} ids per tag call, got {}", ids.len())));
        }
        let mut nodes = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(n) = inner.world.nodes.get(id).filter(|n| n.region == region) else {
                return Err(invalid(
                    "SimNodeNotFound",
                    format!("no node `{id}` in region `{region}`; nothing was tagged"),
                ));
            };
            let mut n = n.clone();
            for key in remove {
                n.tags.remove(key);
            }
            n.tags.extend(set.iter());
            // The pool a node reports follows its address tag.
            n.pool = n.tags.get(TAG_ADDRESS).and_then(|a| a.parse::<Address>().ok());
            nodes.push(n);
        }
        inner.commit(vec![Change::Nodes { nodes }])?;
        Ok(())
    }

    /// `gpuplan sim launch`: `count` running nodes of the cheapest instance type with
    /// `gpus` GPUs of model `gpu` in `zone`, carrying no gpuplan tag (made by hand, as far
    /// as gpuplan can tell). The new ids, in order.
    pub fn launch_unmanaged(
        &self,
        gpu: &str,
        gpus: Option<u32>,
        count: u32,
        capacity: Capacity,
        zone: &str,
    ) -> Result<Vec<String>, SimError> {
        let cat = catalog();
        let region = cat
            .regions(ProviderKind::Sim)
            .into_iter()
            .find(|r| r.zones.iter().any(|z| z == zone))
            .map(|r| r.name.clone())
            .ok_or_else(|| SimError::Invalid(format!("no region of the sim catalogs has the zone `{zone}`")))?;
        let mut types: Vec<&crate::catalog::InstanceType> = cat
            .instance_types(ProviderKind::Sim)
            .into_iter()
            .filter(|t| t.gpu == gpu && gpus.is_none_or(|g| t.gpus == g))
            .filter(|t| placeable(&region, zone, std::slice::from_ref(&t.name)).is_ok())
            .collect();
        types.sort_by(|a, b| a.price.total_cmp(&b.price).then_with(|| a.name.cmp(&b.name)));
        let t = types
            .first()
            .ok_or_else(|| SimError::Invalid(format!("no instance type with {gpu} is sold in `{zone}`")))?;
        let mut inner = self.lock();
        // As the cloud would: no more than the zone holds (and `--count 4294967295` is
        // refused at once instead of building four billion nodes).
        let limit = inner.world.limit(zone, capacity).unwrap_or_else(|| self.config.default_capacity());
        let live = inner.world.live_count(zone, capacity, &t.name);
        if u64::from(live) + u64::from(count) > u64::from(limit) {
            return Err(SimError::Invalid(format!(
                "insufficient {capacity} capacity for {} in `{zone}`: {live} of {limit} live, {count} more asked \
                 (`gpuplan sim capacity {zone}` raises the limit)",
                t.name
            )));
        }
        let mut next = inner.world.counter;
        let launched_ms = inner.world.now_ms();
        let nodes: Vec<SimNode> = (0..count)
            .map(|_| SimNode {
                id: inner.next_id("i-", self.config.seed, &mut next),
                pool: None,
                instance_type: t.name.clone(),
                region: region.clone(),
                zone: zone.to_string(),
                capacity,
                state: NodeState::Running,
                image: None,
                tags: Tags::new(),
                launched_ms,
                ended_ms: None,
                hardware: None,
            })
            .collect();
        let ids = nodes.iter().map(|n| n.id.clone()).collect();
        inner.commit(vec![Change::Counter { next }, Change::Nodes { nodes }])?;
        Ok(ids)
    }
}
