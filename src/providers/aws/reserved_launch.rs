//! Launching a pool's nodes into a reservation on EC2 (docs/design/big-runs.md,
//! `capacity {}`): one `RunInstances` of the pool's launch template, with
//! `CapacityReservationSpecification.CapacityReservationTarget` naming the reservation
//! and, for a Capacity Block, `InstanceMarketOptions.MarketType=capacity-block`, in the
//! reservation's zone, under the plan's token. A fleet cannot target one reservation,
//! so reserved batches do not go through `CreateFleet`.

use aws_sdk_ec2::types::{
    CapacityReservationSpecification, CapacityReservationTarget, InstanceMarketOptionsRequest, InstanceType,
    LaunchTemplateSpecification, MarketType, Placement, ResourceType,
};

use super::errors::from_sdk;
use super::fleet::tag_specs;
use super::{AwsProvider, Bucket};
use crate::model::reservation::{ReservationKind, ReservationTarget};
use crate::providers::{Capacity, CreateNodes, CreateResult, ErrorClass, Node, NodeState, ProviderError};

impl AwsProvider {
    /// `req`'s nodes, launched into `target`.
    pub(super) async fn create_reserved(
        &self,
        req: &CreateNodes,
        target: &ReservationTarget,
    ) -> Result<CreateResult, ProviderError> {
        if req.count == 0 {
            return Ok(CreateResult::default());
        }
        let region = req.region.as_str();
        let (types, subnet) =
            tokio::join!(self.usable_types(region, &req.instance_types), self.subnet_for(region, &req.zone));
        let types = types?;
        let ty = types.first().cloned().ok_or_else(|| {
            ProviderError::new(ErrorClass::Invalid, "NoInstanceType", "no allowed instance type is sold here")
        })?;
        // With EFA: the template of the type's interface count, and the interfaces named
        // in the call with their subnet (`efa.rs`).
        let efa = match super::efa::wants_efa(req) {
            true => self.efa_groups(region, std::slice::from_ref(&ty)).await?.first().map(|(n, _)| *n),
            false => None,
        };
        let template = self.make_template(req, self.find_template(req, efa).await?).await?;
        let image = super::template::image_of(self, req)?;
        let subnet = subnet?;
        let client = self.client(region).await?;
        let aim = CapacityReservationTarget::builder().capacity_reservation_id(&target.id).build();
        let mut call = client
            .run_instances()
            .client_token(&req.token)
            .launch_template(
                LaunchTemplateSpecification::builder()
                    .launch_template_id(&template.id)
                    .version(template.version.to_string())
                    .build(),
            )
            .instance_type(InstanceType::from(ty.as_str()))
            // All or none: the plan sized the batch to the reservation's room.
            .min_count(i32::try_from(req.count).unwrap_or(i32::MAX))
            .max_count(i32::try_from(req.count).unwrap_or(i32::MAX))
            .capacity_reservation_specification(
                CapacityReservationSpecification::builder().capacity_reservation_target(aim).build(),
            )
            .set_tag_specifications(Some(tag_specs(req, &[ResourceType::Instance, ResourceType::Volume])));
        let group = super::fleet::group_of(req);
        if let Some(n) = efa {
            let groups = &self.settings.security_groups;
            call = call.set_network_interfaces(Some(super::efa::launch_interfaces(n, subnet.as_deref(), groups)));
        }
        call = match subnet {
            Some(s) if efa.is_none() => {
                call.subnet_id(s).set_placement(group.map(|g| Placement::builder().group_name(g).build()))
            }
            Some(_) => call.set_placement(group.map(|g| Placement::builder().group_name(g).build())),
            None => call.placement(
                Placement::builder().availability_zone(&req.zone).set_group_name(group.map(str::to_string)).build(),
            ),
        };
        if target.kind == ReservationKind::CapacityBlock {
            let market = InstanceMarketOptionsRequest::builder().market_type(MarketType::CapacityBlock).build();
            call = call.instance_market_options(market);
        }
        self.pace(region, "RunInstances", Bucket::RunInstances, Some((Bucket::RunInstancesResource, req.count))).await;
        let out = call.send().await.map_err(|e| from_sdk("RunInstances", e))?;
        let nodes: Vec<Node> = out
            .instances()
            .iter()
            .filter_map(|i| {
                Some(Node {
                    provider: None,
                    id: i.instance_id()?.to_string(),
                    pool: req.pool.clone(),
                    instance_type: ty.clone(),
                    region: req.region.clone(),
                    zone: req.zone.clone(),
                    capacity: Capacity::OnDemand,
                    state: NodeState::Pending,
                    image: Some(image.clone()),
                    tags: req.tags.clone(),
                })
            })
            .collect();
        let mut errors = Vec::new();
        if nodes.len() < req.count as usize {
            errors.push(ProviderError::new(
                ErrorClass::OutOfCapacity,
                "ReservationCapacityExceeded",
                format!("RunInstances into {} launched {} of {} instances", target.id, nodes.len(), req.count),
            ));
        }
        Ok(CreateResult { nodes, errors })
    }
}
