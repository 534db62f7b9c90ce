//! The GPU instance catalog: what each cloud sells, where, and at what reference price.
//!
//! The data lives in one reviewable JSON file per cloud (`aws.json`, `tencentcloud.json`,
//! `alicloud.json`, one instance type per line), embedded with `include_str!` and parsed once.
//! `README.md` beside this file says where the numbers come from and how to update them;
//! `check.rs` holds the row checks the tests run over every file.
//!
//! This module only answers questions about the data. It never talks to a cloud: live prices
//! and capacity are the providers' business. The `sim` provider serves all three catalogs.

mod check;
pub mod hardware;
#[cfg(test)]
mod tests;

pub use check::problems;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::model::ProviderKind;

/// CNY per USD used when no rate is configured (approximate; see README.md).
pub const DEFAULT_CNY_PER_USD: f64 = 7.1;

/// The clouds that have a catalog, in the order `sim` searches them.
pub const CLOUDS: [ProviderKind; 3] = [ProviderKind::Aws, ProviderKind::Tencentcloud, ProviderKind::Alicloud];

const SOURCES: [(&str, &str); 3] = [
    ("aws.json", include_str!("aws.json")),
    ("tencentcloud.json", include_str!("tencentcloud.json")),
    ("alicloud.json", include_str!("alicloud.json")),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Currency {
    Usd,
    Cny,
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Currency::Usd => "USD",
            Currency::Cny => "CNY",
        })
    }
}

/// A canonical GPU model. `memory_gib` is the nominal memory per GPU; `aliases` are spellings
/// users write (`A100`, `v100-32g`) used for hints. An alias may name several models.
#[derive(Debug, PartialEq, Eq)]
pub struct GpuModel {
    pub name: &'static str,
    pub memory_gib: u32,
    pub aliases: &'static [&'static str],
}

const fn gpu(name: &'static str, memory_gib: u32, aliases: &'static [&'static str]) -> GpuModel {
    GpuModel { name, memory_gib, aliases }
}

pub const GPU_MODELS: &[GpuModel] = &[
    gpu("T4", 16, &["Tesla-T4", "T4-16GB"]),
    gpu("A10", 24, &["A10-24GB", "Tesla-A10"]),
    gpu("A10G", 24, &["A10G-24GB"]),
    gpu("L4", 24, &["L4-24GB"]),
    gpu("L20", 48, &["L20-48GB"]),
    gpu("L40S", 48, &["L40S-48GB"]),
    gpu("V100-16GB", 16, &["V100", "Tesla-V100", "V100-16G", "V100-SXM2-16GB"]),
    gpu("V100-32GB", 32, &["V100", "Tesla-V100", "V100-32G", "V100-SXM2-32GB"]),
    gpu("A100-40GB", 40, &["A100", "A100-40G", "A100-SXM4-40GB"]),
    gpu("A100-80GB", 80, &["A100", "A100-80G", "A100-SXM4-80GB"]),
    gpu("H100", 80, &["H100-80GB", "H100-80G", "H100-SXM"]),
    gpu("H200", 141, &["H200-141GB", "H200-141G"]),
    // AWS reports 179 GiB per B200 (NVIDIA markets 192 GB, 180 GB usable).
    gpu("B200", 179, &["B200-180GB", "B200-192GB"]),
];

/// MIG profiles (NVIDIA's Multi-Instance GPU user guide): (GPU model, profile, slices of
/// that profile one GPU offers).
pub const MIG_PROFILES: &[(&str, &str, u32)] = &[
    ("A100-40GB", "1g.5gb", 7),
    ("A100-40GB", "2g.10gb", 3),
    ("A100-40GB", "3g.20gb", 2),
    ("A100-40GB", "4g.20gb", 1),
    ("A100-40GB", "7g.40gb", 1),
    ("A100-80GB", "1g.10gb", 7),
    ("A100-80GB", "2g.20gb", 3),
    ("A100-80GB", "3g.40gb", 2),
    ("A100-80GB", "4g.40gb", 1),
    ("A100-80GB", "7g.80gb", 1),
    ("H100", "1g.10gb", 7),
    ("H100", "1g.20gb", 4),
    ("H100", "2g.20gb", 3),
    ("H100", "3g.40gb", 2),
    ("H100", "4g.40gb", 1),
    ("H100", "7g.80gb", 1),
];

/// Slices of `profile` one GPU of `gpu` offers; `None` when the model does not offer it.
pub fn mig_slices(gpu: &str, profile: &str) -> Option<u32> {
    MIG_PROFILES.iter().find(|(g, p, _)| *g == gpu && *p == profile).map(|(_, _, n)| *n)
}

/// The MIG profiles a GPU model offers.
pub fn mig_profiles(gpu: &str) -> Vec<&'static str> {
    MIG_PROFILES.iter().filter(|(g, _, _)| *g == gpu).map(|(_, p, _)| *p).collect()
}

/// Resolve a GPU name the user typed (`a100-80gb`, `H100`) to catalog names: the exact
/// model when there is one, else every model it could mean.
pub fn resolve_gpu(name: &str) -> Vec<&'static str> {
    if let Some(m) = catalog().gpu_model(name) {
        return vec![m.name];
    }
    gpu_models_like(name).into_iter().map(|m| m.name).collect()
}

/// Models whose canonical name or an alias equals `name`, ignoring case, `-`, `_` and spaces.
/// Several models come back for ambiguous spellings such as `A100`.
pub fn gpu_models_like(name: &str) -> Vec<&'static GpuModel> {
    let key = normalize(name);
    GPU_MODELS.iter().filter(|m| normalize(m.name) == key || m.aliases.iter().any(|a| normalize(a) == key)).collect()
}

fn normalize(s: &str) -> String {
    s.chars().filter(|c| !matches!(c, '-' | '_' | ' ')).flat_map(char::to_uppercase).collect()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Region {
    pub cloud: ProviderKind,
    pub name: String,
    pub zones: Vec<String>,
}

/// One instance type. `gpu_memory_gib` is per GPU; `price` is on-demand per hour in
/// `currency`, for the file's `price_region`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceType {
    pub cloud: ProviderKind,
    pub name: String,
    pub gpu: String,
    pub gpus: u32,
    pub gpu_memory_gib: f64,
    pub vcpu: u32,
    pub ram_gib: f64,
    pub regions: Vec<String>,
    /// Zones it is offered in, when narrower than all zones of `regions`; empty means all.
    pub zones: Vec<String>,
    pub price: f64,
    pub currency: Currency,
    pub price_source: String,
    pub as_of: String,
    pub price_estimated: bool,
    pub note: Option<String>,
    /// The cloud's typical spot discount (fraction off on-demand), copied from the file.
    pub spot_discount: f64,
}

impl InstanceType {
    pub fn price_usd(&self, cny_per_usd: f64) -> f64 {
        match self.currency {
            Currency::Usd => self.price,
            Currency::Cny => self.price / cny_per_usd,
        }
    }

    /// Estimated spot price: on-demand less the cloud's typical discount.
    pub fn spot_price_usd(&self, cny_per_usd: f64) -> f64 {
        self.price_usd(cny_per_usd) * (1.0 - self.spot_discount)
    }

    pub fn offered_in(&self, region: &str) -> bool {
        self.regions.iter().any(|r| r == region)
    }

    /// Zones of `region` where this type is offered (none if the region is not offered).
    pub fn zones_in<'a>(&'a self, region: &'a Region) -> Vec<&'a str> {
        if region.cloud != self.cloud || !self.offered_in(&region.name) {
            return Vec::new();
        }
        let all = self.zones.is_empty();
        region.zones.iter().filter(|z| all || self.zones.contains(z)).map(String::as_str).collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CloudCatalog {
    pub cloud: ProviderKind,
    pub currency: Currency,
    /// Region whose prices the file records; other regions reuse them as an estimate.
    pub price_region: String,
    pub spot_discount: f64,
    pub spot_source: String,
    pub spot_as_of: String,
    pub regions: Vec<Region>,
    pub instance_types: Vec<InstanceType>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    clouds: Vec<CloudCatalog>,
    /// (cloud, type) positions by type name, by GPU model, and (cloud, region) positions by
    /// region name, each in catalog order: every pool looks types and regions up several
    /// times, and a scan of every cloud's list compared strings for most of them.
    types_by_name: HashMap<String, Vec<(usize, usize)>>,
    types_by_gpu: HashMap<String, Vec<(usize, usize)>>,
    regions_by_name: HashMap<String, Vec<(usize, usize)>>,
    /// [`Catalog::matching`]'s answers so far.
    matched: Matched,
}

/// [`Catalog::matching`]'s answers, as (cloud, type) positions. A fleet repeats a handful
/// of GPU shapes over thousands of pools, and a plan resolves each pool's shape several
/// times (validation, refresh, diff, cost): each distinct question is answered once per
/// catalog. The catalog never changes once built, so an answer never goes stale; the
/// memo dies with its catalog and is not written anywhere.
#[derive(Default)]
struct Matched(Mutex<Vec<MatchedShape>>);

struct MatchedShape {
    provider: ProviderKind,
    region: String,
    gpu: String,
    gpus_per_node: u32,
    cny_per_usd: u64,
    types: Vec<(usize, usize)>,
}

/// Past this many distinct questions the memo stops growing (its lookup is a scan).
const MATCHED_MAX: usize = 64;

impl Clone for Matched {
    fn clone(&self) -> Self {
        Matched::default()
    }
}

/// A memo says nothing about the catalog it belongs to.
impl PartialEq for Matched {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl fmt::Debug for Matched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Matched")
    }
}

/// The embedded catalog, parsed on first use.
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let clouds = SOURCES
            .iter()
            .map(|(file, src)| {
                parse(src).unwrap_or_else(|e| panic!("embedded catalog src/catalog/{file} is invalid: {e}"))
            })
            .collect();
        Catalog::new(clouds)
    })
}

impl Catalog {
    pub fn new(clouds: Vec<CloudCatalog>) -> Self {
        let mut types_by_name: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
        let mut types_by_gpu: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
        let mut regions_by_name: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
        for (c, cloud) in clouds.iter().enumerate() {
            for (i, t) in cloud.instance_types.iter().enumerate() {
                types_by_name.entry(t.name.clone()).or_default().push((c, i));
                types_by_gpu.entry(t.gpu.clone()).or_default().push((c, i));
            }
            for (i, r) in cloud.regions.iter().enumerate() {
                regions_by_name.entry(r.name.clone()).or_default().push((c, i));
            }
        }
        Catalog { clouds, types_by_name, types_by_gpu, regions_by_name, matched: Matched::default() }
    }

    /// Whether `provider` is served the catalog of cloud number `c`.
    fn serves(&self, provider: ProviderKind, c: usize) -> bool {
        provider == ProviderKind::Sim || self.clouds[c].cloud == provider
    }

    /// The instance types at `positions` that `provider` is served, in catalog order.
    fn types_at<'a>(
        &'a self,
        provider: ProviderKind,
        positions: Option<&'a Vec<(usize, usize)>>,
    ) -> impl Iterator<Item = &'a InstanceType> + 'a {
        positions
            .into_iter()
            .flatten()
            .filter(move |(c, _)| self.serves(provider, *c))
            .map(|&(c, i)| &self.clouds[c].instance_types[i])
    }

    /// The regions named `name` that `provider` is served, in catalog order.
    fn regions_named<'a>(&'a self, provider: ProviderKind, name: &str) -> impl Iterator<Item = &'a Region> + 'a {
        self.regions_by_name
            .get(name)
            .into_iter()
            .flatten()
            .filter(move |(c, _)| self.serves(provider, *c))
            .map(|&(c, i)| &self.clouds[c].regions[i])
    }

    pub fn cloud(&self, cloud: ProviderKind) -> Option<&CloudCatalog> {
        self.clouds.iter().find(|c| c.cloud == cloud)
    }

    /// `sim` serves every cloud's catalog; a real provider only its own.
    pub fn clouds_for(&self, provider: ProviderKind) -> Vec<&CloudCatalog> {
        self.clouds.iter().filter(|c| provider == ProviderKind::Sim || c.cloud == provider).collect()
    }

    pub fn instance_types(&self, provider: ProviderKind) -> Vec<&InstanceType> {
        self.clouds_for(provider).into_iter().flat_map(|c| &c.instance_types).collect()
    }

    pub fn regions(&self, provider: ProviderKind) -> Vec<&Region> {
        self.clouds_for(provider).into_iter().flat_map(|c| &c.regions).collect()
    }

    /// For `sim`, the first cloud (in [`CLOUDS`] order) that has it.
    pub fn instance_type(&self, provider: ProviderKind, name: &str) -> Option<&InstanceType> {
        self.types_at(provider, self.types_by_name.get(name)).next()
    }

    /// For `sim`, the first cloud (in [`CLOUDS`] order) that has it: `ap-southeast-1` exists
    /// at both AWS and Alibaba Cloud.
    pub fn region(&self, provider: ProviderKind, name: &str) -> Option<&Region> {
        self.regions_named(provider, name).next()
    }

    /// Zones of `region` where `t` is offered, read from `t`'s own cloud: for `sim` a region
    /// name may exist at two clouds (`ap-southeast-1`), and [`Catalog::region`] returns the
    /// first, which may not be the one that sells `t`.
    pub fn type_zones<'a>(&'a self, t: &'a InstanceType, region: &str) -> Vec<&'a str> {
        self.cloud(t.cloud)
            .and_then(|c| c.regions.iter().find(|r| r.name == region))
            .map(|r| t.zones_in(r))
            .unwrap_or_default()
    }

    /// Every zone of the regions named `region` (for `sim`, at every cloud that has one),
    /// in catalog order, each once.
    pub fn region_zones(&self, provider: ProviderKind, region: &str) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for r in self.regions_named(provider, region) {
            for z in &r.zones {
                if !out.contains(&z.as_str()) {
                    out.push(z);
                }
            }
        }
        out
    }

    /// Zones of a region (empty if unknown).
    pub fn zones_of(&self, provider: ProviderKind, region: &str) -> Vec<&str> {
        self.region(provider, region).map(|r| r.zones.iter().map(String::as_str).collect()).unwrap_or_default()
    }

    /// Types offering `gpus_per_node` GPUs of model `gpu` in `region`, cheapest first (price in
    /// USD using `cny_per_usd`). Equal prices put the smaller host (fewer vCPUs) first, then
    /// go by name: estimated per-GPU prices often tie with their larger siblings.
    pub fn matching(
        &self,
        provider: ProviderKind,
        region: &str,
        gpu: &str,
        gpus_per_node: u32,
        cny_per_usd: f64,
    ) -> Vec<&InstanceType> {
        let cny = cny_per_usd.to_bits();
        let same = |m: &MatchedShape| {
            m.provider == provider
                && m.gpus_per_node == gpus_per_node
                && m.cny_per_usd == cny
                && m.region == region
                && m.gpu == gpu
        };
        // A poisoned memo (a panic elsewhere while it was held) is only a memo: answer anew.
        if let Ok(memo) = self.matched.0.lock()
            && let Some(m) = memo.iter().find(|m| same(m))
        {
            return m.types.iter().map(|&(c, i)| &self.clouds[c].instance_types[i]).collect();
        }
        let mut found: Vec<(usize, usize)> = self
            .types_by_gpu
            .get(gpu)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&(c, i)| {
                let t = &self.clouds[c].instance_types[i];
                self.serves(provider, c) && t.gpus == gpus_per_node && t.offered_in(region)
            })
            .collect();
        let at = |&(c, i): &(usize, usize)| &self.clouds[c].instance_types[i];
        found.sort_by(|a, b| {
            let (a, b) = (at(a), at(b));
            a.price_usd(cny_per_usd)
                .total_cmp(&b.price_usd(cny_per_usd))
                .then(a.vcpu.cmp(&b.vcpu))
                .then_with(|| a.name.cmp(&b.name))
        });
        let types = found.iter().map(at).collect();
        if let Ok(mut memo) = self.matched.0.lock()
            && memo.len() < MATCHED_MAX
        {
            memo.push(MatchedShape {
                provider,
                region: region.to_string(),
                gpu: gpu.to_string(),
                gpus_per_node,
                cny_per_usd: cny,
                types: found,
            });
        }
        types
    }

    /// The model with exactly this canonical name.
    pub fn gpu_model(&self, name: &str) -> Option<&'static GpuModel> {
        GPU_MODELS.iter().find(|m| m.name == name)
    }
}

/// Parse one cloud's file. The file format is the private `File` below.
pub fn parse(src: &str) -> Result<CloudCatalog, serde_json::Error> {
    let file: File = serde_json::from_str(src)?;
    let cloud = file.cloud;
    let discount = file.spot.typical_discount;
    Ok(CloudCatalog {
        cloud,
        currency: file.currency,
        price_region: file.price_region,
        spot_discount: discount,
        spot_source: file.spot.source,
        spot_as_of: file.spot.as_of,
        regions: file.regions.into_iter().map(|r| Region { cloud, name: r.name, zones: r.zones }).collect(),
        instance_types: file
            .instance_types
            .into_iter()
            .map(|t| InstanceType {
                cloud,
                name: t.name,
                gpu: t.gpu,
                gpus: t.gpus,
                gpu_memory_gib: t.gpu_memory_gib,
                vcpu: t.vcpu,
                ram_gib: t.ram_gib,
                regions: t.regions,
                zones: t.zones,
                price: t.price,
                currency: file.currency,
                price_source: t.price_source,
                as_of: t.as_of,
                price_estimated: t.price_estimated,
                note: t.note,
                spot_discount: discount,
            })
            .collect(),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    cloud: ProviderKind,
    currency: Currency,
    price_region: String,
    spot: FileSpot,
    regions: Vec<FileRegion>,
    instance_types: Vec<FileType>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpot {
    typical_discount: f64,
    source: String,
    as_of: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRegion {
    name: String,
    zones: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileType {
    name: String,
    gpu: String,
    gpus: u32,
    gpu_memory_gib: f64,
    vcpu: u32,
    ram_gib: f64,
    regions: Vec<String>,
    #[serde(default)]
    zones: Vec<String>,
    price: f64,
    #[serde(default)]
    price_estimated: bool,
    price_source: String,
    as_of: String,
    #[serde(default)]
    note: Option<String>,
}
