//! Elastic Fabric Adapter on EC2 (docs/design/big-runs.md, `network { fabric = "efa" }`).
//!
//! - Interfaces: each node takes as many EFA interfaces as `DescribeInstanceTypes` says its
//!   type allows (`NetworkInfo.EfaInfo.MaximumEfaInterfaces`): the first on network card
//!   0 as device 0, the rest one per network card as device 1, all in the pool's security
//!   groups. Types of one pool may differ in that count, so a pool has one launch template
//!   per count (`template.rs`), and a fleet one launch template config per count
//!   (`fleet.rs`); a reserved `RunInstances` names its interfaces with their subnet.
//! - Security groups ([`FabricPort`]): EFA traffic passes only between members of a group
//!   that lets all traffic in from and out to itself. Each of the provider block's
//!   `security_groups` gets those two rules (`AuthorizeSecurityGroupIngress/Egress` with
//!   the group as its own peer) where `DescribeSecurityGroups` does not show them yet; a
//!   rule that appeared in between (`InvalidPermission.Duplicate`) is fine. gpuplan never
//!   removes them.

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    InstanceNetworkInterfaceSpecification, IpPermission, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    UserIdGroupPair,
};

use super::errors::from_sdk;
use super::{AwsProvider, Bucket, read};
use crate::model::hardware::Fabric;
use crate::providers::{CreateNodes, ErrorClass, FabricPort, ProviderError};

/// EC2's answer for a rule the group already has.
const DUPLICATE: &str = "InvalidPermission.Duplicate";

/// The interface type EC2 knows EFA by.
const EFA: &str = "efa";

/// Does `req` launch with EFA interfaces?
pub fn wants_efa(req: &CreateNodes) -> bool {
    req.hardware.as_ref().and_then(|h| h.fabric) == Some(Fabric::Efa)
}

/// (network card, device index) of each of `n` interfaces: card 0 as device 0, then one
/// per card as device 1.
pub fn slots(n: u32) -> Vec<(i32, i32)> {
    (0..n.max(1)).map(|i| (i32::try_from(i).unwrap_or(i32::MAX), i32::from(i > 0))).collect()
}

/// The launch template's interfaces: `n` EFA interfaces in `groups`; the subnet comes
/// from each fleet override.
pub fn template_interfaces(
    n: u32,
    groups: &[String],
) -> Vec<LaunchTemplateInstanceNetworkInterfaceSpecificationRequest> {
    slots(n)
        .into_iter()
        .map(|(card, device)| {
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .network_card_index(card)
                .device_index(device)
                .interface_type(EFA)
                .set_groups((!groups.is_empty()).then(|| groups.to_vec()))
                .delete_on_termination(true)
                .build()
        })
        .collect()
}

/// A `RunInstances` call's interfaces: `n` EFA interfaces in `subnet` and `groups` (a
/// call that names interfaces names its subnet in them, not beside them).
pub fn launch_interfaces(
    n: u32,
    subnet: Option<&str>,
    groups: &[String],
) -> Vec<InstanceNetworkInterfaceSpecification> {
    slots(n)
        .into_iter()
        .map(|(card, device)| {
            InstanceNetworkInterfaceSpecification::builder()
                .network_card_index(card)
                .device_index(device)
                .interface_type(EFA)
                .set_subnet_id(subnet.map(str::to_string))
                .set_groups((!groups.is_empty()).then(|| groups.to_vec()))
                .delete_on_termination(true)
                .build()
        })
        .collect()
}

/// The all-traffic rule whose peer is `group` itself.
fn self_rule(group: &str) -> IpPermission {
    IpPermission::builder()
        .ip_protocol("-1")
        .user_id_group_pairs(UserIdGroupPair::builder().group_id(group).build())
        .build()
}

/// Does `rules` hold the all-traffic rule with `group` as its peer?
fn has_self_rule(rules: &[IpPermission], group: &str) -> bool {
    rules
        .iter()
        .any(|r| r.ip_protocol() == Some("-1") && r.user_id_group_pairs().iter().any(|p| p.group_id() == Some(group)))
}

impl AwsProvider {
    /// `types` (the pool's order) grouped by how many EFA interfaces each takes, each group
    /// in that order and the groups in the order of their first type. A type without EFA
    /// is left out with a warning; none left is an error, before anything is made.
    pub(super) async fn efa_groups(
        &self,
        region: &str,
        types: &[String],
    ) -> Result<Vec<(u32, Vec<String>)>, ProviderError> {
        let facts = self.gpu_facts(region, types).await?;
        let mut groups: Vec<(u32, Vec<String>)> = Vec::new();
        let mut lacking = Vec::new();
        for t in types {
            match facts.get(t).and_then(Option::as_ref).map(|f| f.efa).filter(|n| *n > 0) {
                Some(n) => match groups.iter_mut().find(|(c, _)| *c == n) {
                    Some((_, v)) => v.push(t.clone()),
                    None => groups.push((n, vec![t.clone()])),
                },
                None => lacking.push(t.as_str()),
            }
        }
        if !lacking.is_empty() && !groups.is_empty() {
            self.warn_once(
                region,
                &format!(
                    "EC2 reports no EFA for {}; gpuplan will not launch it with `fabric = \"efa\"`",
                    lacking.join(", ")
                ),
            );
        }
        if groups.is_empty() {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "EfaUnsupported",
                format!(
                    "EC2 reports no EFA for {} in {region} (hint: use an instance type with EFA, or remove `fabric`)",
                    lacking.join(", ")
                ),
            ));
        }
        Ok(groups)
    }

    /// Adds each missing self-referencing rule to `group`.
    async fn authorize_self(&self, region: &str, group: &str, ingress: bool) -> Result<(), ProviderError> {
        let client = self.client(region).await?;
        let sent = if ingress {
            self.pace(region, "AuthorizeSecurityGroupIngress", Bucket::Mutating, None).await;
            client
                .authorize_security_group_ingress()
                .group_id(group)
                .ip_permissions(self_rule(group))
                .send()
                .await
                .map(|_| ())
                .map_err(|e| from_sdk("AuthorizeSecurityGroupIngress", e))
        } else {
            self.pace(region, "AuthorizeSecurityGroupEgress", Bucket::Mutating, None).await;
            client
                .authorize_security_group_egress()
                .group_id(group)
                .ip_permissions(self_rule(group))
                .send()
                .await
                .map(|_| ())
                .map_err(|e| from_sdk("AuthorizeSecurityGroupEgress", e))
        };
        match sent {
            Err(e) if e.code == DUPLICATE => Ok(()),
            other => other,
        }
    }
}

#[async_trait]
impl FabricPort for AwsProvider {
    async fn ensure_fabric(&self, region: &str, fabric: Fabric) -> Result<(), ProviderError> {
        if fabric != Fabric::Efa {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "FabricUnsupported",
                format!("EC2 offers fabric `efa`, not `{fabric}`"),
            ));
        }
        let groups = &self.settings.security_groups;
        if groups.is_empty() {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "EfaNeedsSecurityGroups",
                "EFA needs security groups that let their members reach each other (hint: name them in the provider block's `security_groups`)",
            ));
        }
        let client = self.client(region).await?;
        let out = read(|| async {
            self.pace(region, "DescribeSecurityGroups", Bucket::NonMutating, None).await;
            client
                .describe_security_groups()
                .set_group_ids(Some(groups.clone()))
                .send()
                .await
                .map_err(|e| from_sdk("DescribeSecurityGroups", e))
        })
        .await?;
        for id in groups {
            let found = out.security_groups().iter().find(|g| g.group_id() == Some(id.as_str()));
            if !found.is_some_and(|g| has_self_rule(g.ip_permissions(), id)) {
                self.authorize_self(region, id, true).await?;
            }
            if !found.is_some_and(|g| has_self_rule(g.ip_permissions_egress(), id)) {
                self.authorize_self(region, id, false).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_interface_is_device_0_on_card_0_and_the_rest_one_per_card_as_device_1() {
        assert_eq!(slots(1), [(0, 0)]);
        assert_eq!(slots(4), [(0, 0), (1, 1), (2, 1), (3, 1)]);
        assert_eq!(slots(32).len(), 32);
        let groups = vec!["sg-1".to_string()];
        let lt = template_interfaces(2, &groups);
        assert!(
            lt.iter().all(|i| i.interface_type() == Some("efa") && i.groups() == ["sg-1"] && i.subnet_id().is_none())
        );
        let run = launch_interfaces(2, Some("subnet-a"), &groups);
        assert!(run.iter().all(|i| i.subnet_id() == Some("subnet-a")), "{run:?}");
    }

    #[test]
    fn a_group_has_the_rule_only_with_itself_as_the_peer_on_all_traffic() {
        assert!(has_self_rule(&[self_rule("sg-1")], "sg-1"));
        assert!(!has_self_rule(&[self_rule("sg-2")], "sg-1"), "another group as the peer");
        let tcp = IpPermission::builder()
            .ip_protocol("tcp")
            .user_id_group_pairs(UserIdGroupPair::builder().group_id("sg-1").build())
            .build();
        assert!(!has_self_rule(&[tcp], "sg-1"), "one protocol is not all traffic");
    }
}
