//! Pool creates: one `CreateFleet` of type `instant` per [`CreateNodes`] batch.
//!
//! Why one fleet per batch rather than one per pool: the plan places nodes per zone and
//! capacity type, and the executor (`apply/pool.rs`) owns the fallback order (other
//! zones, then on-demand, or wait, or fail) and decides it from [`ErrorClass`]. A fleet
//! spanning zones would put nodes where the plan did not, and the next plan would move
//! them back; a fleet per batch keeps one result per decision and one idempotency token
//! per batch, so a resumed apply repeats exactly the call it made (EC2 answers a repeated
//! `ClientToken` with the first call's fleet and launches nothing new). Within the batch's
//! zone the overrides list every allowed instance type, so EC2's allocation strategy
//! (`price-capacity-optimized` for spot, `lowest-price` for on-demand) already falls
//! back across types. The extra calls are few: at most two per zone per pool change.
//!
//! Instant fleets report what they could not launch in `Errors` with HTTP 200; those
//! become classified [`ProviderError`]s beside the nodes that were made.

use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest,
    FleetLaunchTemplateSpecificationRequest, FleetOnDemandAllocationStrategy, FleetType, InstanceLifecycle,
    InstanceType, OnDemandOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest, Tag,
    TagSpecification, TargetCapacitySpecificationRequest,
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

impl AwsProvider {
    /// The subnet to launch into in `zone`: the block's `subnets` entry, else the zone's
    /// default subnet (default VPC), looked up once per run. Launching by subnet rather
    /// than by `AvailabilityZone` pins the zone on EC2 and on emulators alike (moto
    /// ignores an override's `AvailabilityZone`). `None`: no default subnet either, so
    /// the override names the zone.
    pub(super) async fn subnet_for(&self, region: &str, zone: &str) -> Result<Option<String>, ProviderError> {
        if let Some(s) = self.settings.subnets.get(zone) {
            return Ok(Some(s.clone()));
        }
        let mut cache = self.default_subnets.lock().await;
        if let Some(s) = cache.get(&(region.to_string(), zone.to_string())) {
            return Ok(s.clone());
        }
        let client = self.client(region).await?;
        let out = super::read(|| async {
            self.pace(region, "DescribeSubnets", Bucket::NonMutating, None).await;
            client
                .describe_subnets()
                .filters(super::nodes::filter("availability-zone", [zone]))
                .filters(super::nodes::filter("default-for-az", ["true"]))
                .send()
                .await
                .map_err(|e| from_sdk("DescribeSubnets", e))
        })
        .await?;
        let found = out.subnets().iter().find_map(|s| s.subnet_id().map(str::to_string));
        cache.insert((region.to_string(), zone.to_string()), found.clone());
        Ok(found)
    }

    pub(super) async fn create(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        if req.count == 0 {
            return Ok(CreateResult::default());
        }
        let region = req.region.as_str();
        let types = self.usable_types(region, &req.instance_types).await?;
        let template = self.ensure_template(req).await?;
        let client = self.client(region).await?;
        let subnet = self.subnet_for(region, &req.zone).await?;
        let max_price = match req.capacity {
            Capacity::Spot => req.max_spot_price.map(price),
            Capacity::OnDemand => None,
        };
        let overrides: Vec<FleetLaunchTemplateOverridesRequest> = types
            .iter()
            .map(|t| {
                let b = FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(InstanceType::from(t.as_str()))
                    .set_max_price(max_price.clone());
                match &subnet {
                    Some(s) => b.subnet_id(s),
                    None => b.availability_zone(&req.zone),
                }
                .build()
            })
            .collect();
        let count = i32::try_from(req.count).unwrap_or(i32::MAX);
        let capacity = match req.capacity {
            Capacity::Spot => TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(count)
                .spot_target_capacity(count)
                .on_demand_target_capacity(0)
                .default_target_capacity_type(DefaultTargetCapacityType::Spot),
            Capacity::OnDemand => TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(count)
                .on_demand_target_capacity(count)
                .spot_target_capacity(0)
                .default_target_capacity_type(DefaultTargetCapacityType::OnDemand),
        }
        .build();
        self.pace(region, "CreateFleet", Bucket::Mutating, None).await;
        let out = client
            .create_fleet()
            .r#type(FleetType::Instant)
            .client_token(&req.token)
            .launch_template_configs(
                FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(
                        FleetLaunchTemplateSpecificationRequest::builder()
                            .launch_template_id(&template.id)
                            .version(template.version.to_string())
                            .build(),
                    )
                    .set_overrides(Some(overrides))
                    .build(),
            )
            .target_capacity_specification(capacity)
            .spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                    .build(),
            )
            .on_demand_options(
                OnDemandOptionsRequest::builder()
                    .allocation_strategy(FleetOnDemandAllocationStrategy::LowestPrice)
                    .build(),
            )
            .set_tag_specifications(Some(tag_specs(req, &[ResourceType::Instance, ResourceType::Volume])))
            .send()
            .await
            .map_err(|e| from_sdk("CreateFleet", e))?;

        let mut nodes = Vec::new();
        for group in out.instances() {
            let capacity = match group.lifecycle() {
                Some(InstanceLifecycle::Spot) => Capacity::Spot,
                Some(InstanceLifecycle::OnDemand) => Capacity::OnDemand,
                _ => req.capacity,
            };
            let zone = group
                .launch_template_and_overrides()
                .and_then(|l| l.overrides())
                .and_then(|o| o.availability_zone())
                .filter(|z| !z.is_empty())
                .unwrap_or(&req.zone);
            for id in group.instance_ids() {
                nodes.push(Node {
                    id: id.clone(),
                    pool: req.pool.clone(),
                    instance_type: group.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
                    region: req.region.clone(),
                    zone: zone.to_string(),
                    capacity,
                    state: NodeState::Pending,
                    image: Some(super::template::image_of(self, req)?),
                    tags: req.tags.clone(),
                });
            }
        }
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        nodes.dedup_by(|a, b| a.id == b.id);
        // EC2 can launch more than asked when weights round up; never report past the count.
        nodes.truncate(req.count as usize);

        let mut errors: Vec<ProviderError> = Vec::new();
        if nodes.len() < req.count as usize {
            for e in out.errors() {
                let code = e.error_code().unwrap_or("Unknown");
                let mut pe = from_code(code, e.error_message().unwrap_or_default());
                let types = e
                    .launch_template_and_overrides()
                    .and_then(|l| l.overrides())
                    .and_then(|o| o.instance_type())
                    .map(|t| format!(" for {}", t.as_str()))
                    .unwrap_or_default();
                pe.message = format!("CreateFleet {} in {}{types}: {}", req.capacity, req.zone, pe.message);
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
                        req.zone,
                        nodes.len(),
                        req.count
                    ),
                ));
            }
        }
        Ok(CreateResult { nodes, errors })
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
}
