//! Reads ahead for new pools: a pool's first `CreateFleet` needs its instance types
//! checked (`DescribeInstanceTypes`), its zones' default subnets (`DescribeSubnets`) and
//! its launch template looked up (`DescribeLaunchTemplates`). None of them depends on
//! what refresh finds for a pool the state has no record of, so an apply asks them
//! while refresh lists the fleet, one call of each per region for all its new pools,
//! and the creates find the answers in the run's caches: a create waits for the
//! template's creation and its fleets, not for a round trip of look-ups first.
//!
//! Nothing here writes: the template is still made by the create, once its types are
//! known good, so a refused type leaves nothing behind. The answers are of the same
//! age as the ones a create used to get (both come from this run, moments before the
//! writes that need them), and each template listing serves one look-up only.

use std::collections::{BTreeMap, BTreeSet};

use super::AwsProvider;
use super::template::template_name;
use crate::providers::NewPool;

/// Template names per `DescribeLaunchTemplates` call: the `MaxResults` ceiling, so an
/// answer (at most one template per name) always fits one page.
const NAMES_PER_CALL: usize = 200;

impl AwsProvider {
    /// One call of each look-up in a region, together. A failed one leaves its cache
    /// empty, and the create makes that call again and reports its error where it
    /// always did: the errors are dropped here on purpose.
    pub(super) async fn read_ahead_in(&self, region: &str, pools: Vec<&NewPool>) {
        if region.trim().is_empty() {
            return;
        }
        let types: Vec<String> =
            pools.iter().flat_map(|p| &p.instance_types).cloned().collect::<BTreeSet<_>>().into_iter().collect();
        let zones: BTreeSet<&str> = pools.iter().flat_map(|p| &p.zones).map(String::as_str).collect();
        let zones: Vec<&str> = zones.into_iter().collect();
        let names: BTreeSet<String> = pools.iter().flat_map(|p| names_of(p)).collect();
        let names: Vec<String> = names.into_iter().collect();
        let (_types, _targets, ()) = tokio::join!(
            async { if types.is_empty() { Ok(BTreeMap::new()) } else { self.gpu_facts(region, &types).await } },
            async { if zones.is_empty() { Ok(Vec::new()) } else { self.targets(region, &zones).await } },
            async {
                for chunk in names.chunks(NAMES_PER_CALL) {
                    self.list_templates_ahead(region, chunk).await;
                }
            }
        );
    }
}

/// Every name the pool's template may have: the pool's own, and one per capacity when
/// its nodes join an EKS cluster (see `find_template`). Listing all three costs nothing
/// more than one: they go in the same call's filter.
fn names_of(p: &NewPool) -> [String; 3] {
    let pool = p.pool.to_string();
    [
        template_name(&p.lineage, &pool),
        template_name(&p.lineage, &format!("{pool}.spot")),
        template_name(&p.lineage, &format!("{pool}.on-demand")),
    ]
}
