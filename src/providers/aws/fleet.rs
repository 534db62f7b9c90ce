//! Pool creates: one `CreateFleet` of type `instant` per [`CreateNodes`] batch.
//!
//! The plan gives an AWS pool over several zones one batch per capacity type with every
//! allowed zone (`PoolShape::provider_places_zones`), so a 500-node pool with a spot/
//! on-demand mix is two fleets. Each fleet's overrides list every allowed instance type
//! in every allowed subnet, and EC2's allocation strategy picks among them:
//! - spot: `price-capacity-optimized`, AWS's recommendation: the pools (type × zone) with
//!   the most spare capacity, then the lowest price, so the least likely to be
//!   interrupted;
//! - on-demand: `prioritized`, with each override's priority the rank of its type in the
//!   pool's order (the one the plan prices, cheapest first), every zone of a type alike.
//!   `lowest-price` would follow EC2's own price list instead of the order the plan and
//!   its cost report assume; both fall through the types when the first runs short.
//!
//! The executor (`apply/pool.rs`) still owns the fallback (on-demand, or wait, or fail):
//! a fleet reports what it could not launch in `Errors` with HTTP 200, beside the
//! instances it did launch. Every instance launched is reported, so the executor records
//! it before deciding anything (nothing is orphaned), and the `ClientToken` comes from
//! the plan, so a retried call returns the first call's fleet (nothing is duplicated).

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    CreateFleetInstance, DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetOnDemandAllocationStrategy,
    FleetType, InstanceLifecycle, InstanceType, OnDemandOptionsRequest, ResourceType, SpotAllocationStrategy,
    SpotOptionsRequest, Tag, TagSpecification, TargetCapacitySpecificationRequest,
};

use super::errors::{from_code, from_sdk};
use super::{AwsProvider, Bucket};
use crate::providers::{Capacity, CreateNodes, CreateResult, ErrorClass, Node, NodeState, ProviderError};

/// Tags for the given resource types.
pub fn tag_specs(req: &CreateNodes, types: &[ResourceType]) -> Vec<TagSpecification> {
    let tags: Vec<Tag> = req.tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
    types
        .iter()
        .map(|t| TagSpecification::builder().resource_type(t.clone()).set_tags(Some(tags.clone())).build())
        .collect()
}

/// A spot price as EC2 wants it: USD per hour, as a decimal string.
pub fn price(p: f64) -> String {
    let s = format!("{p:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Where an override launches: its zone, and the subnet there (`None`: the zone itself).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub zone: String,
    pub subnet: Option<String>,
}

/// The overrides of a fleet: every type of `types` in every target. The priority (the
/// type's rank in `order`, the pool's order) is set only for on-demand, where
/// `prioritized` reads it: a fleet whose types are split over several templates (EFA
/// counts, `efa.rs`) ranks them as one. `group`: the cluster placement group every
/// instance launches into (a batch in a group has one zone).
pub fn ranked_overrides(
    order: &[String],
    types: &[String],
    targets: &[Target],
    capacity: Capacity,
    max_price: Option<&str>,
    group: Option<&str>,
) -> Vec<FleetLaunchTemplateOverridesRequest> {
    let mut out = Vec::with_capacity(types.len() * targets.len());
    for t in types {
        let rank = order.iter().position(|o| o == t).unwrap_or(order.len());
        for target in targets {
            let b = FleetLaunchTemplateOverridesRequest::builder()
                .instance_type(InstanceType::from(t.as_str()))
                .set_max_price(max_price.map(str::to_string))
                .set_priority((capacity == Capacity::OnDemand).then_some(rank as f64))
                .set_placement(group.map(|g| aws_sdk_ec2::types::Placement::builder().group_name(g).build()));
            out.push(
                match &target.subnet {
                    Some(s) => b.subnet_id(s),
                    None => b.availability_zone(&target.zone),
                }
                .build(),
            );
        }
    }
    out
}

/// A fleet's launch template config: `template` with `overrides`.
fn launch_config(
    template: &super::template::TemplateRef,
    overrides: Vec<FleetLaunchTemplateOverridesRequest>,
) -> FleetLaunchTemplateConfigRequest {
    FleetLaunchTemplateConfigRequest::builder()
        .launch_template_specification(
            FleetLaunchTemplateSpecificationRequest::builder()
                .launch_template_id(&template.id)
                .version(template.version.to_string())
                .build(),
        )
        .set_overrides(Some(overrides))
        .build()
}

/// The cluster placement group a batch launches into (`network { placement_group }`).
pub fn group_of(req: &CreateNodes) -> Option<&str> {
    req.hardware.as_ref().and_then(|h| h.placement_group.as_deref())
}

/// The zone an answer's group (or error) was launched in, from its override's zone or
/// subnet; `None` when the answer names neither.
fn zone_of(ov: Option<&aws_sdk_ec2::types::FleetLaunchTemplateOverrides>, targets: &[Target]) -> Option<String> {
    let ov = ov?;
    if let Some(z) = ov.availability_zone().filter(|z| !z.is_empty()) {
        return Some(z.to_string());
    }
    let subnet = ov.subnet_id()?;
    targets.iter().find(|t| t.subnet.as_deref() == Some(subnet)).map(|t| t.zone.clone())
}

/// Why a fleet launched fewer than `req.count` instances (`launched`): each of its
/// distinct errors with the capacity, zone and type it was for, the worst class first
/// (the executor stops on anything but a stock-out); a stock-out when EC2 gave none.
fn shortfall(
    req: &CreateNodes,
    fleet_errors: &[aws_sdk_ec2::types::CreateFleetError],
    targets: &[Target],
    launched: usize,
    errors: &mut Vec<ProviderError>,
) {
    for e in fleet_errors {
        let code = e.error_code().unwrap_or("Unknown");
        let mut pe = from_code(code, e.error_message().unwrap_or_default());
        let ov = e.launch_template_and_overrides().and_then(|l| l.overrides());
        let zone = zone_of(ov, targets).unwrap_or_else(|| req.placement());
        let types = ov.and_then(|o| o.instance_type()).map(|t| format!(" for {}", t.as_str())).unwrap_or_default();
        pe.message = format!("CreateFleet {} in {zone}{types}: {}", req.capacity, pe.message);
        if !errors.iter().any(|x| x.code == pe.code && x.message == pe.message) {
            errors.push(pe);
        }
    }
    // The worst class first: the executor stops on anything but a stock-out.
    errors.sort_by_key(|e| e.class == ErrorClass::OutOfCapacity);
    if errors.is_empty() {
        errors.push(ProviderError::new(
            ErrorClass::OutOfCapacity,
            "UnfulfillableCapacity",
            format!(
                "CreateFleet {} in {}: EC2 launched {} of {} instances and gave no reason",
                req.capacity,
                req.placement(),
                launched,
                req.count
            ),
        ));
    }
}

impl AwsProvider {
    /// The subnet to launch into in `zone` (see [`Self::targets`]).
    pub(super) async fn subnet_for(&self, region: &str, zone: &str) -> Result<Option<String>, ProviderError> {
        Ok(self.targets(region, &[zone]).await?.pop().and_then(|t| t.subnet))
    }

    /// Where to launch in each zone: the block's `subnets` entry, else the zone's default
    /// subnet (default VPC), looked up for all zones not known yet in one
    /// `DescribeSubnets` and kept for the run. Launching by subnet rather than by
    /// `AvailabilityZone` pins the zone on EC2 and on emulators alike (moto ignores an
    /// override's `AvailabilityZone`). No default subnet either: the override names the zone.
    pub(super) async fn targets(&self, region: &str, zones: &[&str]) -> Result<Vec<Target>, ProviderError> {
        let key = |z: &str| (region.to_string(), z.to_string());
        let mut cache = self.default_subnets.lock().await;
        let missing: Vec<&str> = zones
            .iter()
            .copied()
            .filter(|z| !self.settings.subnets.contains_key(*z) && !cache.contains_key(&key(z)))
            .collect();
        if !missing.is_empty() {
            let client = self.client(region).await?;
            let out = super::read(|| async {
                self.pace(region, "DescribeSubnets", Bucket::NonMutating, None).await;
                client
                    .describe_subnets()
                    .filters(super::nodes::filter("availability-zone", missing.iter().copied()))
                    .filters(super::nodes::filter("default-for-az", ["true"]))
                    .send()
                    .await
                    .map_err(|e| from_sdk("DescribeSubnets", e))
            })
            .await?;
            for z in &missing {
                let found = out
                    .subnets()
                    .iter()
                    .find(|s| s.availability_zone() == Some(*z))
                    .and_then(|s| s.subnet_id())
                    .map(str::to_string);
                cache.insert(key(z), found);
            }
        }
        Ok(zones
            .iter()
            .map(|z| Target {
                zone: z.to_string(),
                subnet: self.settings.subnets.get(*z).cloned().or_else(|| cache.get(&key(z)).cloned().flatten()),
            })
            .collect())
    }

    pub(super) async fn create(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        if req.count == 0 {
            return Ok(CreateResult::default());
        }
        let region = req.region.as_str();
        // The type check, the subnet look-up and the template's look-up are reads
        // independent of each other: asked together, one round trip. Their errors keep
        // their order, and the template is made only once the types are known good (a
        // refused type leaves nothing behind).
        let zones = req.placement_zones();
        // With EFA the templates wait for the types' interface counts (one per count).
        let efa = super::efa::wants_efa(req);
        let plain = async { if efa { None } else { Some(self.find_template(req, None).await) } };
        let (types, targets, template) =
            tokio::join!(self.usable_types(region, &req.instance_types), self.targets(region, &zones), plain);
        let types = types?;
        let max_price = match req.capacity {
            Capacity::Spot => req.max_spot_price.map(price),
            Capacity::OnDemand | Capacity::Reserved => None,
        };
        let targets = targets?;
        let ranked = |these: &[String]| {
            ranked_overrides(&types, these, &targets, req.capacity, max_price.as_deref(), group_of(req))
        };
        let mut configs = Vec::new();
        match template {
            Some(template) => {
                let t = self.make_template(req, template?).await?;
                configs.push(launch_config(&t, ranked(&types)));
            }
            None => {
                for (n, these) in self.efa_groups(region, &types).await? {
                    let t = self.make_template(req, self.find_template(req, Some(n)).await?).await?;
                    configs.push(launch_config(&t, ranked(&these)));
                }
            }
        }
        let image = super::template::image_of(self, req)?;
        let client = self.client(region).await?;
        let count = i32::try_from(req.count).unwrap_or(i32::MAX);
        let (spot, on_demand, default) = match req.capacity {
            Capacity::Spot => (count, 0, DefaultTargetCapacityType::Spot),
            Capacity::OnDemand | Capacity::Reserved => (0, count, DefaultTargetCapacityType::OnDemand),
        };
        self.pace(region, "CreateFleet", Bucket::Mutating, None).await;
        let out = client
            .create_fleet()
            .r#type(FleetType::Instant)
            .client_token(&req.token)
            .set_launch_template_configs(Some(configs))
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(count)
                    .spot_target_capacity(spot)
                    .on_demand_target_capacity(on_demand)
                    .default_target_capacity_type(default)
                    .build(),
            )
            .spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                    .build(),
            )
            .on_demand_options(
                OnDemandOptionsRequest::builder()
                    .allocation_strategy(FleetOnDemandAllocationStrategy::Prioritized)
                    .build(),
            )
            .set_tag_specifications(Some(tag_specs(req, &[ResourceType::Instance, ResourceType::Volume])))
            .send()
            .await
            .map_err(|e| from_sdk("CreateFleet", e))?;

        let (nodes, lookup_error) = self.launched(req, out.instances(), &targets, &image).await;
        let mut errors: Vec<ProviderError> = lookup_error.into_iter().collect();
        if nodes.len() < req.count as usize {
            shortfall(req, out.errors(), &targets, nodes.len(), &mut errors);
        }
        Ok(CreateResult { nodes, errors })
    }

    /// The nodes a fleet launched, each in its zone. Every instance is reported, even past
    /// the count (weights could round up): the executor records them all, so none is left
    /// untracked, and the next plan removes a surplus. The zone comes from each group's
    /// override; when the answer names none and the fleet spans zones, one
    /// `DescribeInstances` asks. If that fails, the nodes are still reported (zone left
    /// empty for the next refresh to fill) beside the error.
    async fn launched(
        &self,
        req: &CreateNodes,
        groups: &[CreateFleetInstance],
        targets: &[Target],
        image: &str,
    ) -> (Vec<Node>, Option<ProviderError>) {
        let single = (targets.len() == 1).then(|| targets[0].zone.clone());
        let mut nodes = Vec::new();
        for group in groups {
            let capacity = match group.lifecycle() {
                Some(InstanceLifecycle::Spot) => Capacity::Spot,
                Some(InstanceLifecycle::OnDemand) => Capacity::OnDemand,
                _ => req.capacity,
            };
            let zone = zone_of(group.launch_template_and_overrides().and_then(|l| l.overrides()), targets)
                .or_else(|| single.clone())
                .unwrap_or_default();
            for id in group.instance_ids() {
                nodes.push(Node {
                    provider: None,
                    id: id.clone(),
                    pool: req.pool.clone(),
                    instance_type: group.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
                    region: req.region.clone(),
                    zone: zone.clone(),
                    capacity,
                    state: NodeState::Pending,
                    image: Some(image.to_string()),
                    tags: req.tags.clone(),
                });
            }
        }
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        nodes.dedup_by(|a, b| a.id == b.id);
        let unknown: Vec<String> = nodes.iter().filter(|n| n.zone.is_empty()).map(|n| n.id.clone()).collect();
        if unknown.is_empty() {
            return (nodes, None);
        }
        match self.zones_of(&req.region, &unknown).await {
            Ok(zones) => {
                for n in nodes.iter_mut().filter(|n| n.zone.is_empty()) {
                    n.zone = zones.get(&n.id).cloned().unwrap_or_default();
                }
                (nodes, None)
            }
            Err(e) => (nodes, Some(e)),
        }
    }

    /// The zone of each instance, by id.
    async fn zones_of(&self, region: &str, ids: &[String]) -> Result<BTreeMap<String, String>, ProviderError> {
        let mut out = BTreeMap::new();
        for chunk in ids.chunks(super::nodes::IDS_PER_FILTER) {
            let found =
                self.describe_all(region, vec![super::nodes::filter("instance-id", chunk.iter().cloned())]).await?;
            for i in &found {
                if let (Some(id), Some(z)) = (i.instance_id(), i.placement().and_then(|p| p.availability_zone())) {
                    out.insert(id.to_string(), z.to_string());
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_are_plain_decimals() {
        assert_eq!(price(25.0), "25");
        assert_eq!(price(0.1234567), "0.123457");
        assert_eq!(price(1.5), "1.5");
    }

    #[test]
    fn overrides_cover_every_type_in_every_zone_and_rank_types_for_on_demand() {
        let types = vec!["g5.xlarge".to_string(), "g5.2xlarge".to_string()];
        let targets = vec![
            Target { zone: "us-east-1a".into(), subnet: Some("subnet-a".into()) },
            Target { zone: "us-east-1b".into(), subnet: None },
        ];
        let od = ranked_overrides(&types, &types, &targets, Capacity::OnDemand, None, None);
        let shape: Vec<(&str, Option<&str>, Option<&str>, Option<f64>)> = od
            .iter()
            .map(|o| (o.instance_type().unwrap().as_str(), o.subnet_id(), o.availability_zone(), o.priority()))
            .collect();
        assert_eq!(
            shape,
            [
                ("g5.xlarge", Some("subnet-a"), None, Some(0.0)),
                ("g5.xlarge", None, Some("us-east-1b"), Some(0.0)),
                ("g5.2xlarge", Some("subnet-a"), None, Some(1.0)),
                ("g5.2xlarge", None, Some("us-east-1b"), Some(1.0)),
            ]
        );
        let spot =
            ranked_overrides(&types, &types, &targets, Capacity::Spot, Some("0.5"), Some("gpuplan-x-train-us-east-1a"));
        assert!(spot.iter().all(|o| o.priority().is_none() && o.max_price() == Some("0.5")), "{spot:?}");
        let group =
            |o: &FleetLaunchTemplateOverridesRequest| o.placement().and_then(|p| p.group_name()).map(str::to_string);
        assert!(spot.iter().all(|o| group(o).as_deref() == Some("gpuplan-x-train-us-east-1a")), "{spot:?}");
        assert!(od.iter().all(|o| o.placement().is_none()), "no group asked, none sent: {od:?}");
        // Types split over two templates keep their rank in the pool's order.
        let second = ranked_overrides(&types, &types[1..], &targets, Capacity::OnDemand, None, None);
        assert!(second.iter().all(|o| o.priority() == Some(1.0)), "{second:?}");
    }

    #[test]
    fn an_answer_names_its_zone_by_zone_or_by_subnet() {
        use aws_sdk_ec2::types::FleetLaunchTemplateOverrides;
        let targets = vec![Target { zone: "us-east-1b".into(), subnet: Some("subnet-b".into()) }];
        let by_subnet = FleetLaunchTemplateOverrides::builder().subnet_id("subnet-b").build();
        assert_eq!(zone_of(Some(&by_subnet), &targets).as_deref(), Some("us-east-1b"));
        let by_zone = FleetLaunchTemplateOverrides::builder().availability_zone("us-east-1c").build();
        assert_eq!(zone_of(Some(&by_zone), &targets).as_deref(), Some("us-east-1c"));
        let other = FleetLaunchTemplateOverrides::builder().subnet_id("subnet-x").build();
        assert_eq!(zone_of(Some(&other), &targets), None);
        assert_eq!(zone_of(None, &targets), None);
    }
}
