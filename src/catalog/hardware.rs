//! Disk types and their prices, and which instance types have a fast fabric
//! (docs/design/big-runs.md): the data `disk {}` and `network {}` are checked and priced
//! against, kept here as a reviewable table like the instance types' JSON files.

use crate::catalog::Currency;
use crate::model::ProviderKind;
use crate::model::hardware::Fabric;

/// One disk type a cloud sells, priced per GB-month in `currency` (pay as you go, the
/// catalog's price region).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskType {
    pub cloud: ProviderKind,
    pub name: &'static str,
    pub price_gb_month: f64,
    pub currency: Currency,
    pub source: &'static str,
}

const fn disk(
    cloud: ProviderKind,
    name: &'static str,
    price: f64,
    currency: Currency,
    source: &'static str,
) -> DiskType {
    DiskType { cloud, name, price_gb_month: price, currency, source }
}

const AWS_EBS: &str = "AWS EBS pricing, us-east-1 (2026-09-24); io2 and gp3 above the free IOPS bill extra";
const TENCENT_CBS: &str = "Tencent CBS pay-as-you-go list price, ap-guangzhou (approximate, 2026-09-24)";
const ALI_DISK: &str = "Alibaba Cloud disk pay-as-you-go list price, cn-hangzhou (approximate, 2026-09-24)";

/// Every disk type `disk {}` accepts; the first of each cloud is its default.
pub const DISK_TYPES: &[DiskType] = &[
    disk(ProviderKind::Aws, "gp3", 0.08, Currency::Usd, AWS_EBS),
    disk(ProviderKind::Aws, "gp2", 0.10, Currency::Usd, AWS_EBS),
    disk(ProviderKind::Aws, "io2", 0.125, Currency::Usd, AWS_EBS),
    disk(ProviderKind::Tencentcloud, "CLOUD_BSSD", 0.5, Currency::Cny, TENCENT_CBS),
    disk(ProviderKind::Tencentcloud, "CLOUD_PREMIUM", 0.35, Currency::Cny, TENCENT_CBS),
    disk(ProviderKind::Tencentcloud, "CLOUD_SSD", 1.0, Currency::Cny, TENCENT_CBS),
    disk(ProviderKind::Tencentcloud, "CLOUD_HSSD", 1.0, Currency::Cny, TENCENT_CBS),
    disk(ProviderKind::Alicloud, "cloud_essd", 1.0, Currency::Cny, ALI_DISK),
    disk(ProviderKind::Alicloud, "cloud_auto", 0.7, Currency::Cny, ALI_DISK),
    disk(ProviderKind::Alicloud, "cloud_efficiency", 0.35, Currency::Cny, ALI_DISK),
];

/// The disk types of `cloud`, its default first.
pub fn disk_types(cloud: ProviderKind) -> impl Iterator<Item = &'static DiskType> {
    DISK_TYPES.iter().filter(move |d| d.cloud == cloud)
}

/// `name` on `cloud`, if it sells it.
pub fn disk_type(cloud: ProviderKind, name: &str) -> Option<&'static DiskType> {
    disk_types(cloud).find(|d| d.name == name)
}

impl DiskType {
    /// USD per GB-hour (a month is 730 hours, as the clouds' calculators count).
    pub fn usd_per_gb_hour(&self, cny_per_usd: f64) -> f64 {
        let month = match self.currency {
            Currency::Usd => self.price_gb_month,
            Currency::Cny => self.price_gb_month / cny_per_usd,
        };
        month / 730.0
    }
}

/// Instance types with a fast fabric, and how many of its interfaces one node takes (AWS:
/// `NetworkInfo.EfaInfo.MaximumEfaInterfaces` of `DescribeInstanceTypes`, every GPU type of
/// `aws.json` whose `EfaSupported` is true, as of 2026-12-07; apply asks EC2 again and
/// follows its answer; the others: one). Tencent's RDMA types are its HCC families, which
/// CVM launches only into an HPC cluster (HCCPNV4h, HCCPNV5 and other HCC sizes are left
/// out: their exact type names were not confirmed); Alibaba's eRDMA types take one
/// elastic RDMA interface gpuplan asks for.
pub const FABRIC_TYPES: &[(&str, Fabric, u32)] = &[
    ("g4dn.8xlarge", Fabric::Efa, 1),
    ("g4dn.12xlarge", Fabric::Efa, 1),
    ("g4dn.16xlarge", Fabric::Efa, 1),
    ("g4dn.metal", Fabric::Efa, 1),
    ("g5.8xlarge", Fabric::Efa, 1),
    ("g5.12xlarge", Fabric::Efa, 1),
    ("g5.16xlarge", Fabric::Efa, 1),
    ("g5.24xlarge", Fabric::Efa, 1),
    ("g5.48xlarge", Fabric::Efa, 1),
    ("g6.8xlarge", Fabric::Efa, 1),
    ("g6.12xlarge", Fabric::Efa, 1),
    ("g6.16xlarge", Fabric::Efa, 1),
    ("g6.24xlarge", Fabric::Efa, 1),
    ("g6.48xlarge", Fabric::Efa, 1),
    ("g6e.8xlarge", Fabric::Efa, 1),
    ("g6e.12xlarge", Fabric::Efa, 1),
    ("g6e.16xlarge", Fabric::Efa, 1),
    ("g6e.24xlarge", Fabric::Efa, 2),
    ("g6e.48xlarge", Fabric::Efa, 4),
    ("p3dn.24xlarge", Fabric::Efa, 1),
    ("p4d.24xlarge", Fabric::Efa, 4),
    ("p4de.24xlarge", Fabric::Efa, 4),
    ("p5.4xlarge", Fabric::Efa, 1),
    ("p5.48xlarge", Fabric::Efa, 32),
    ("p5e.48xlarge", Fabric::Efa, 32),
    ("p5en.48xlarge", Fabric::Efa, 16),
    ("p6-b200.48xlarge", Fabric::Efa, 8),
    ("ecs.gn8is-8x.32xlarge", Fabric::Erdma, 1),
    ("ecs.ebmgn7ex.32xlarge", Fabric::Erdma, 1),
    ("HCCG5v.24XLARGE384", Fabric::Rdma, 1),
];

/// The fabric `instance_type` has and its interface count, if any.
pub fn fabric_of(instance_type: &str) -> Option<(Fabric, u32)> {
    FABRIC_TYPES.iter().find(|(t, _, _)| *t == instance_type).map(|(_, f, n)| (*f, *n))
}

/// The fabric each cloud offers (`fabric = "…"` on any other cloud is refused).
pub fn cloud_fabric(cloud: ProviderKind) -> Option<Fabric> {
    match cloud {
        ProviderKind::Aws => Some(Fabric::Efa),
        ProviderKind::Tencentcloud => Some(Fabric::Rdma),
        ProviderKind::Alicloud => Some(Fabric::Erdma),
        ProviderKind::Sim => None,
    }
}
