//! One launch template per pool, created and versioned by gpuplan, tagged as its own.
//!
//! The template holds what every node of the pool shares (image, key pair, security
//! groups, instance profile, IMDSv2); instance types and subnets go in CreateFleet's
//! overrides. Its name is derived from the state's lineage and the pool's address, so
//! each state has its own templates. A version's description carries a digest of its
//! data: when the data changes gpuplan adds a version (CreateLaunchTemplateVersion)
//! and launches with that version number. A template of that name without gpuplan's
//! tags is never used or changed. Results are cached for the run.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_ec2::types::{
    LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest, LaunchTemplateInstanceMetadataOptionsRequest,
    RequestLaunchTemplateData, ResourceType, Tag, TagSpecification, VolumeType,
};
use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::errors::from_sdk;
use super::nodes::filter;
use super::{AwsProvider, Bucket, read};
use crate::hex::hex;
use crate::model::hardware::Disks;
use crate::providers::{CreateNodes, ErrorClass, ProviderError, TAG_LINEAGE, TAG_MANAGED};

/// A launch template version to launch with.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateRef {
    pub id: String,
    pub version: i64,
}

/// Per-run cache: (region, name) → the version matching a digest.
#[derive(Debug, Default)]
pub struct Templates {
    cache: tokio::sync::Mutex<HashMap<(String, String), (TemplateRef, String)>>,
    /// (region, name) → EC2's templates of that name, listed ahead for a new pool
    /// (`ahead.rs`); taken by the first look-up of that name, which then asks nothing.
    ahead: std::sync::Mutex<HashMap<(String, String), Vec<aws_sdk_ec2::types::LaunchTemplate>>>,
}

impl Templates {
    /// The listing made ahead for this template, if any, removed: it serves one look-up.
    fn take_ahead(&self, key: &(String, String)) -> Option<Vec<aws_sdk_ec2::types::LaunchTemplate>> {
        self.ahead.lock().unwrap_or_else(|p| p.into_inner()).remove(key)
    }
}

/// The template's name: `gpuplan-<lineage prefix>-<address>`, with characters EC2
/// does not allow replaced, at most 128 characters.
pub fn template_name(lineage: &str, pool: &str) -> String {
    let clean: String =
        pool.chars().map(|c| if c.is_ascii_alphanumeric() || "().-/_".contains(c) { c } else { '_' }).collect();
    let prefix: String = lineage.chars().filter(|c| c.is_ascii_alphanumeric()).take(8).collect();
    let mut name = format!("gpuplan-{prefix}-{clean}");
    if name.len() > 128 {
        let digest = hex(&Sha256::digest(pool.as_bytes()))[..16].to_string();
        name.truncate(110);
        name = format!("{name}-{digest}");
    }
    name
}

/// What goes into the template, and its digest.
struct Data {
    image: String,
    key_name: Option<String>,
    security_groups: Vec<String>,
    iam_instance_profile: Option<String>,
    /// Base64 user data: nodeadm's join config for pools in an EKS cluster.
    user_data: Option<String>,
    /// `disk {}`, with the image's root device name the root disk's mapping must use.
    disks: Option<(Disks, String)>,
    /// `fabric = "efa"`: this many EFA interfaces, in `security_groups` (`efa.rs`).
    efa: Option<u32>,
}

impl Data {
    fn digest(&self) -> String {
        let mut text = format!(
            "v1|{}|{}|{}|{}",
            self.image,
            self.key_name.as_deref().unwrap_or_default(),
            self.security_groups.join(","),
            self.iam_instance_profile.as_deref().unwrap_or_default()
        );
        // Appended only when set, so the digests of templates without it do not change.
        if let Some(u) = &self.user_data {
            text += &format!("|{u}");
        }
        if let Some((d, root)) = &self.disks {
            text += &format!("|disks {root} {d}");
        }
        if let Some(n) = self.efa {
            text += &format!("|efa {n}");
        }
        hex(&Sha256::digest(text.as_bytes()))[..24].to_string()
    }

    fn request(&self) -> RequestLaunchTemplateData {
        let mut b = RequestLaunchTemplateData::builder()
            .image_id(&self.image)
            .set_key_name(self.key_name.clone())
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_tokens(LaunchTemplateHttpTokensState::Required)
                    .build(),
            );
        // Interfaces carry their own groups: EC2 takes groups beside them on no launch.
        if let Some(n) = self.efa {
            b = b.set_network_interfaces(Some(super::efa::template_interfaces(n, &self.security_groups)));
        } else if !self.security_groups.is_empty() {
            b = b.set_security_group_ids(Some(self.security_groups.clone()));
        }
        if let Some(u) = &self.user_data {
            b = b.user_data(u);
        }
        if let Some((d, root)) = &self.disks {
            let mappings = block_devices(d, root)
                .into_iter()
                .map(|(name, size, kind)| {
                    LaunchTemplateBlockDeviceMappingRequest::builder()
                        .device_name(name)
                        .ebs(
                            LaunchTemplateEbsBlockDeviceRequest::builder()
                                .volume_size(size)
                                .volume_type(VolumeType::from(kind.as_str()))
                                .delete_on_termination(true)
                                .build(),
                        )
                        .build()
                })
                .collect();
            b = b.set_block_device_mappings(Some(mappings));
        }
        if let Some(p) = &self.iam_instance_profile {
            let spec = LaunchTemplateIamInstanceProfileSpecificationRequest::builder();
            let spec = if p.starts_with("arn:") { spec.arn(p) } else { spec.name(p) };
            b = b.iam_instance_profile(spec.build());
        }
        b.build()
    }
}

/// The block device mappings of `disks` as (device name, GB, volume type): the root disk
/// on the image's root device `root`, data disks on `/dev/sdf` onwards (the names EC2
/// recommends for EBS data volumes).
pub fn block_devices(disks: &Disks, root: &str) -> Vec<(String, i32, String)> {
    let size = |gb: u32| i32::try_from(gb).unwrap_or(i32::MAX);
    let mut out = vec![(root.to_string(), size(disks.root.size_gb), disks.root.kind.clone())];
    for (i, d) in disks.data.iter().enumerate() {
        let letter = char::from(b'f' + u8::try_from(i % 20).unwrap_or(0));
        out.push((format!("/dev/sd{letter}"), size(d.size_gb), d.kind.clone()));
    }
    out
}

/// The image of a launch: the request's, else the provider block's.
pub fn image_of(p: &AwsProvider, req: &CreateNodes) -> Result<String, ProviderError> {
    req.image.clone().or_else(|| p.settings.image.clone()).ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Invalid,
            "MissingImage",
            format!(
                "`{}` has no image: AWS needs an AMI id (hint: set `image` in the gpu_pool or in the provider \"aws\" block)",
                req.pool
            ),
        )
    })
}

/// gpuplan's own tags from a request (never the user's labels) for the template.
fn ownership_tags(req: &CreateNodes) -> Vec<Tag> {
    req.tags
        .iter()
        .filter(|(k, _)| k.starts_with("gpuplan:"))
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// A pool's template as looked up, before anything is made: what it must hold, and
/// what the run's cache or EC2 already has of that name. The cache stays locked until
/// [`AwsProvider::make_template`] has settled it, so one pool's template is made once.
pub(super) struct TemplateLookup<'a> {
    cache: tokio::sync::MutexGuard<'a, HashMap<(String, String), (TemplateRef, String)>>,
    key: (String, String),
    data: Data,
    digest: String,
    found: Found,
}

/// What a look-up found.
enum Found {
    /// The run already settled this template at this digest.
    Cached(TemplateRef),
    /// EC2's templates of that name (none: make one).
    Listed(Vec<aws_sdk_ec2::types::LaunchTemplate>),
}

impl AwsProvider {
    /// The pool's template, looked up: its data and name, and one
    /// `DescribeLaunchTemplates` unless the run already settled it. It changes nothing,
    /// so a create asks it together with the type check and makes the template
    /// ([`Self::make_template`]) only once the types are known good. `efa`: the template
    /// of the pool's types that take this many EFA interfaces (`<pool>.efa<n>`).
    pub(super) async fn find_template(
        &self,
        req: &CreateNodes,
        efa: Option<u32>,
    ) -> Result<TemplateLookup<'_>, ProviderError> {
        // Nodes joining an EKS cluster boot with nodeadm's config; its labels differ by
        // capacity, so such a pool has one template per capacity.
        let (user_data, name_of) = match &req.join {
            Some(join) => {
                let dir = self.settings.spec_dir.clone().unwrap_or_default();
                let text = super::eks::user_data(join, &dir, self.settings.home.as_deref())?;
                (Some(base64::engine::general_purpose::STANDARD.encode(text)), format!("{}.{}", req.pool, req.capacity))
            }
            None => (None, req.pool.to_string()),
        };
        let name_of = match efa {
            Some(n) => format!("{name_of}.efa{n}"),
            None => name_of,
        };
        let image = image_of(self, req)?;
        let disks = match req.hardware.as_ref().and_then(|h| h.disks.clone()) {
            Some(d) => Some((d, self.root_device(&req.region, &image).await?)),
            None => None,
        };
        let data = Data {
            disks,
            image,
            key_name: self.settings.key_name.clone(),
            security_groups: self.settings.security_groups.clone(),
            iam_instance_profile: self.settings.iam_instance_profile.clone(),
            user_data,
            efa,
        };
        let digest = data.digest();
        let lineage = req.tags.get(TAG_LINEAGE).unwrap_or_default().to_string();
        let name = template_name(&lineage, &name_of);
        let key = (req.region.clone(), name);
        let cache = self.templates.cache.lock().await;
        let found = match cache.get(&key) {
            Some((t, d)) if *d == digest => Found::Cached(t.clone()),
            _ => match self.templates.take_ahead(&key) {
                Some(listed) => Found::Listed(listed),
                None => {
                    let client = self.client(&req.region).await?;
                    Found::Listed(self.templates_named(&client, &req.region, std::slice::from_ref(&key.1)).await?)
                }
            },
        };
        Ok(TemplateLookup { cache, key, data, digest, found })
    }

    /// The pool's template at a version holding the request's launch data: the one the
    /// look-up found, else a new template or version; a template of that name without
    /// gpuplan's tag is an error.
    pub(super) async fn make_template(
        &self,
        req: &CreateNodes,
        lookup: TemplateLookup<'_>,
    ) -> Result<TemplateRef, ProviderError> {
        let TemplateLookup { mut cache, key, data, digest, found } = lookup;
        let found = match found {
            Found::Cached(t) => return Ok(t),
            Found::Listed(found) => found,
        };
        let (region, name) = (key.0.as_str(), key.1.as_str());
        let client = self.client(region).await?;
        let description = format!("gpuplan {digest}");
        let existing = found.iter().find(|t| t.launch_template_name() == Some(name));
        let token = format!("gp-lt-{}", &hex(&Sha256::digest(format!("{name}|{digest}").as_bytes()))[..40]);
        let t = match existing {
            None => {
                self.pace(region, "CreateLaunchTemplate", Bucket::Mutating, None).await;
                let out = client
                    .create_launch_template()
                    .launch_template_name(name)
                    .version_description(&description)
                    .launch_template_data(data.request())
                    .tag_specifications(
                        TagSpecification::builder()
                            .resource_type(ResourceType::LaunchTemplate)
                            .set_tags(Some(ownership_tags(req)))
                            .build(),
                    )
                    .client_token(&token)
                    .send()
                    .await
                    .map_err(|e| from_sdk("CreateLaunchTemplate", e))?;
                let lt = out.launch_template().ok_or_else(|| missing("CreateLaunchTemplate"))?;
                TemplateRef {
                    id: lt.launch_template_id().unwrap_or_default().to_string(),
                    version: lt.latest_version_number().unwrap_or(1),
                }
            }
            Some(lt) => {
                let tags: BTreeMap<&str, &str> =
                    lt.tags().iter().filter_map(|t| Some((t.key()?, t.value().unwrap_or_default()))).collect();
                if tags.get(TAG_MANAGED) != Some(&"true") {
                    return Err(ProviderError::new(
                        ErrorClass::Invalid,
                        "UnmanagedLaunchTemplate",
                        format!(
                            "a launch template named `{name}` exists in {region} without the tag {TAG_MANAGED}=true; gpuplan will not use or change it (hint: rename or delete it)"
                        ),
                    ));
                }
                let id = lt.launch_template_id().unwrap_or_default().to_string();
                match self.latest_matching(region, &id, &description).await? {
                    Some(version) => TemplateRef { id, version },
                    None => {
                        self.pace(region, "CreateLaunchTemplateVersion", Bucket::LaunchTemplateVersion, None).await;
                        let out = client
                            .create_launch_template_version()
                            .launch_template_id(&id)
                            .version_description(&description)
                            .launch_template_data(data.request())
                            .client_token(&token)
                            .send()
                            .await
                            .map_err(|e| from_sdk("CreateLaunchTemplateVersion", e))?;
                        let version = out
                            .launch_template_version()
                            .and_then(|v| v.version_number())
                            .ok_or_else(|| missing("CreateLaunchTemplateVersion"))?;
                        TemplateRef { id, version }
                    }
                }
            }
        };
        cache.insert(key, (t.clone(), digest));
        Ok(t)
    }

    /// The latest version of a template, if its description says it holds `description`.
    async fn latest_matching(&self, region: &str, id: &str, description: &str) -> Result<Option<i64>, ProviderError> {
        let client = self.client(region).await?;
        let out = read(|| async {
            self.pace(region, "DescribeLaunchTemplateVersions", Bucket::NonMutating, None).await;
            client
                .describe_launch_template_versions()
                .launch_template_id(id)
                .versions("$Latest")
                .send()
                .await
                .map_err(|e| from_sdk("DescribeLaunchTemplateVersions", e))
        })
        .await?;
        Ok(out
            .launch_template_versions()
            .iter()
            .find(|v| v.version_description() == Some(description))
            .and_then(|v| v.version_number()))
    }
}

impl AwsProvider {
    /// The root device name of `image` (`/dev/xvda`, `/dev/sda1`), which a mapping that
    /// sizes the root disk must name (another name adds a volume instead). One
    /// `DescribeImages`, asked only by pools with `disk {}`.
    pub(super) async fn root_device(&self, region: &str, image: &str) -> Result<String, ProviderError> {
        let client = self.client(region).await?;
        let out = read(|| async {
            self.pace(region, "DescribeImages", Bucket::NonMutating, None).await;
            client.describe_images().image_ids(image).send().await.map_err(|e| from_sdk("DescribeImages", e))
        })
        .await?;
        out.images().iter().find_map(|i| i.root_device_name().map(str::to_string)).ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Invalid,
                "InvalidAMIID.NotFound",
                format!(
                    "image {image} is not visible in {region}: gpuplan needs its root device name to size the root disk of `disk {{}}` (hint: check the pool's `image`)"
                ),
            )
        })
    }

    /// The launch templates called one of `names` in `region` (one DescribeLaunchTemplates
    /// call; at most 200 names).
    async fn templates_named(
        &self,
        client: &aws_sdk_ec2::Client,
        region: &str,
        names: &[String],
    ) -> Result<Vec<aws_sdk_ec2::types::LaunchTemplate>, ProviderError> {
        let found = read(|| async {
            self.pace(region, "DescribeLaunchTemplates", Bucket::NonMutating, None).await;
            client
                .describe_launch_templates()
                .filters(filter("launch-template-name", names.iter().map(String::as_str)))
                .send()
                .await
                .map_err(|e| from_sdk("DescribeLaunchTemplates", e))
        })
        .await?;
        Ok(found.launch_templates.unwrap_or_default())
    }
}

impl AwsProvider {
    /// List the templates of these names (at most 200, so the answer fits one page) in one
    /// `DescribeLaunchTemplates` and keep the answer for each name's first look-up (see
    /// `ahead.rs`). A failed call, or an
    /// answer that may be cut short, keeps nothing: the look-up then asks on its own.
    pub(super) async fn list_templates_ahead(&self, region: &str, names: &[String]) {
        let Ok(client) = self.client(region).await else { return };
        let asked = read(|| async {
            self.pace(region, "DescribeLaunchTemplates", Bucket::NonMutating, None).await;
            client
                .describe_launch_templates()
                .filters(filter("launch-template-name", names.iter().map(String::as_str)))
                .max_results(200)
                .send()
                .await
                .map_err(|e| from_sdk("DescribeLaunchTemplates", e))
        })
        .await;
        let Ok(out) = asked else { return };
        if out.next_token().is_some_and(|t| !t.is_empty()) {
            return;
        }
        let mut by_name: HashMap<&str, Vec<aws_sdk_ec2::types::LaunchTemplate>> =
            names.iter().map(|n| (n.as_str(), Vec::new())).collect();
        for lt in out.launch_templates() {
            if let Some(v) = lt.launch_template_name().and_then(|n| by_name.get_mut(n)) {
                v.push(lt.clone());
            }
        }
        let mut ahead = self.templates.ahead.lock().unwrap_or_else(|p| p.into_inner());
        for (name, found) in by_name {
            ahead.insert((region.to_string(), name.to_string()), found);
        }
    }
}

/// Every template a pool may have: its own, its per-capacity ones when it joins an EKS
/// cluster, and of each their per-EFA-count ones (`find_template`).
fn pool_template_names(lineage: &str, pool: &str) -> Vec<String> {
    let mut counts: Vec<u32> = vec![1, 2, 4, 8, 16, 32];
    counts.extend(crate::catalog::hardware::FABRIC_TYPES.iter().map(|(_, _, n)| *n));
    counts.sort_unstable();
    counts.dedup();
    let mut out = Vec::new();
    for base in [pool.to_string(), format!("{pool}.spot"), format!("{pool}.on-demand")] {
        out.extend(counts.iter().map(|n| template_name(lineage, &format!("{base}.efa{n}"))));
        out.push(template_name(lineage, &base));
    }
    out
}

fn missing(api: &str) -> ProviderError {
    ProviderError::new(ErrorClass::Retryable, "BadResponse", format!("{api}: the response lacks the launch template"))
}

impl AwsProvider {
    /// Delete a pool's launch template once none of its instances is left (after a
    /// destroy or a scale to zero). Only gpuplan's own template of that name is deleted.
    pub(super) async fn drop_template_if_unused(
        &self,
        region: &str,
        lineage: &str,
        pool: &str,
    ) -> Result<(), ProviderError> {
        let alive = self
            .describe_all(
                region,
                vec![
                    filter(&format!("tag:{TAG_LINEAGE}"), [lineage]),
                    filter(&format!("tag:{}", crate::providers::TAG_ADDRESS), [pool]),
                    filter("instance-state-name", ["pending", "running", "stopping", "stopped"]),
                ],
            )
            .await?;
        if !alive.is_empty() {
            return Ok(());
        }
        let client = self.client(region).await?;
        let names = pool_template_names(lineage, pool);
        // One listing for them all.
        let found = self.templates_named(&client, region, &names).await?;
        for name in names {
            for lt in found.iter().filter(|t| t.launch_template_name() == Some(name.as_str())) {
                let owned = lt.tags().iter().any(|t| t.key() == Some(TAG_MANAGED) && t.value() == Some("true"));
                let Some(id) = lt.launch_template_id().filter(|_| owned) else { continue };
                self.pace(region, "DeleteLaunchTemplate", Bucket::Mutating, None).await;
                client
                    .delete_launch_template()
                    .launch_template_id(id)
                    .send()
                    .await
                    .map_err(|e| from_sdk("DeleteLaunchTemplate", e))?;
            }
            self.templates.cache.lock().await.remove(&(region.to_string(), name));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_distinct_per_state_and_pool() {
        let a = template_name("0f3a9c1e-77aa-4c1b-9d2e-1234567890ab", "gpu_pool.train");
        assert_eq!(a, "gpuplan-0f3a9c1e-gpu_pool.train");
        let b = template_name("11111111-2222", "gpu_pool.x[\"a b\"]");
        assert_eq!(b, "gpuplan-11111111-gpu_pool.x__a_b__");
        let long = template_name("l", &format!("gpu_pool.{}", "x".repeat(300)));
        assert!(long.len() <= 128, "{}", long.len());
    }
}
