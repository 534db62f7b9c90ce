//! Live prices and shape checks, cached for the run.
//!
//! - `DescribeSpotPriceHistory` from now gives the current spot price per instance type
//!   and zone; an offer carries the lowest over the region's zones.
//! - `DescribeInstanceTypes` confirms that an instance type has the GPU model, count and
//!   memory the catalog says before gpuplan launches it: a type whose model or count
//!   differs is not launched (a warning names it; no usable type left is an error), a
//!   memory difference of more than 10 % is only a warning (AWS reports usable MiB, the
//!   catalog nominal GiB).

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_ec2::types::InstanceType;

use super::errors::from_sdk;
use super::{AwsProvider, Bucket, read};
use crate::catalog::{self, DEFAULT_CNY_PER_USD};
use crate::providers::{Capacity, ErrorClass, Offer, PricePort, ProviderError, sort_offers};
use crate::spec::model::ProviderKind;

/// What `DescribeInstanceTypes` says about a type's GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuFacts {
    pub model: String,
    pub count: u32,
    pub memory_mib: u64,
    /// `NetworkInfo.EfaInfo.MaximumEfaInterfaces` (0: `EfaSupported` is false).
    pub efa: u32,
}

#[derive(Debug, Default)]
pub struct Caches {
    /// (region, type) → facts (`None`: the type has no GPU).
    types: tokio::sync::Mutex<HashMap<(String, String), Option<GpuFacts>>>,
    /// (region, type) → lowest current spot price over the region's zones.
    spot: tokio::sync::Mutex<HashMap<(String, String), Option<f64>>>,
}

/// Does the cloud's view of a type agree with the catalog? `Err` for a model or count
/// mismatch (do not launch), `Ok(Some(warning))` for a memory difference.
pub fn check_type(name: &str, facts: Option<&GpuFacts>) -> Result<Option<String>, String> {
    let Some(cat) = catalog::catalog().instance_type(ProviderKind::Aws, name) else {
        return Ok(Some(format!("`{name}` is not in gpuplan's AWS catalog; its GPUs are not checked")));
    };
    let Some(f) = facts else {
        return Err(format!("EC2 reports no GPU for `{name}`, but the catalog lists {} × {}", cat.gpus, cat.gpu));
    };
    let family = cat.gpu.split('-').next().unwrap_or(&cat.gpu);
    if !f.model.eq_ignore_ascii_case(family) || f.count != cat.gpus {
        return Err(format!(
            "EC2 reports {} × {} for `{name}`, but the catalog lists {} × {}",
            f.count, f.model, cat.gpus, cat.gpu
        ));
    }
    let have_gib = f.memory_mib as f64 / 1024.0;
    if cat.gpu_memory_gib > 0.0 && (have_gib - cat.gpu_memory_gib).abs() / cat.gpu_memory_gib > 0.10 {
        return Ok(Some(format!(
            "EC2 reports {have_gib:.1} GiB per GPU for `{name}`, the catalog {} GiB",
            cat.gpu_memory_gib
        )));
    }
    Ok(None)
}

/// How many EFA interfaces `DescribeInstanceTypes` says one instance of a type takes.
fn efa_interfaces(info: &aws_sdk_ec2::types::InstanceTypeInfo) -> u32 {
    let Some(net) = info.network_info().filter(|n| n.efa_supported() == Some(true)) else { return 0 };
    net.efa_info().and_then(|e| e.maximum_efa_interfaces()).map_or(1, |n| u32::try_from(n).unwrap_or(0))
}

impl AwsProvider {
    /// GPU facts of `types` in a region, from the cache or one `DescribeInstanceTypes`.
    pub(super) async fn gpu_facts(
        &self,
        region: &str,
        types: &[String],
    ) -> Result<BTreeMap<String, Option<GpuFacts>>, ProviderError> {
        let mut cache = self.caches.types.lock().await;
        let missing: Vec<String> =
            types.iter().filter(|t| !cache.contains_key(&(region.to_string(), (*t).clone()))).cloned().collect();
        if !missing.is_empty() {
            let client = self.client(region).await?;
            for chunk in missing.chunks(100) {
                let out = read(|| async {
                    self.pace(region, "DescribeInstanceTypes", Bucket::NonMutating, None).await;
                    client
                        .describe_instance_types()
                        .set_instance_types(Some(chunk.iter().map(|t| InstanceType::from(t.as_str())).collect()))
                        .send()
                        .await
                        .map_err(|e| from_sdk("DescribeInstanceTypes", e))
                })
                .await?;
                for info in out.instance_types() {
                    let Some(name) = info.instance_type().map(|t| t.as_str().to_string()) else { continue };
                    let facts = info.gpu_info().and_then(|g| {
                        let d = g.gpus().first()?;
                        Some(GpuFacts {
                            model: d.name().unwrap_or_default().to_string(),
                            count: g.gpus().iter().map(|d| d.count().unwrap_or(0).max(0) as u32).sum(),
                            memory_mib: d.memory_info().and_then(|m| m.size_in_mib()).unwrap_or(0).max(0) as u64,
                            efa: efa_interfaces(info),
                        })
                    });
                    cache.insert((region.to_string(), name), facts);
                }
                for t in chunk {
                    cache.entry((region.to_string(), t.clone())).or_insert(None);
                }
            }
        }
        Ok(types.iter().map(|t| (t.clone(), cache.get(&(region.to_string(), t.clone())).cloned().flatten())).collect())
    }

    /// The requested types whose GPUs match the catalog, in order. Mismatches are left
    /// out with a warning on stderr; none left is an error.
    pub(super) async fn usable_types(&self, region: &str, types: &[String]) -> Result<Vec<String>, ProviderError> {
        if types.is_empty() {
            return Err(ProviderError::new(ErrorClass::Invalid, "MissingInstanceType", "no instance type to launch"));
        }
        let facts = self.gpu_facts(region, types).await?;
        let mut ok = Vec::new();
        let mut problems = Vec::new();
        for t in types {
            match check_type(t, facts.get(t).and_then(Option::as_ref)) {
                Ok(warning) => {
                    if let Some(w) = warning {
                        self.warn_once(region, &w);
                    }
                    ok.push(t.clone());
                }
                Err(p) => {
                    self.warn_once(region, &format!("{p}; gpuplan will not launch it"));
                    problems.push(p);
                }
            }
        }
        if ok.is_empty() {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "InstanceTypeMismatch",
                format!(
                    "{} (hint: fix `gpu`/`gpus_per_node` or `instance_types`, or the catalog in src/catalog/aws.json)",
                    problems.join("; ")
                ),
            ));
        }
        Ok(ok)
    }

    pub(super) fn warn_once(&self, region: &str, message: &str) {
        let key = format!("{region}|{message}");
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        if warned.insert(key) {
            eprintln!("warning: aws ({region}): {message}");
        }
    }

    /// Current spot prices (lowest over zones) of `types` in a region; prices dated more
    /// than [`STALE_AFTER`] ago are dropped with a warning.
    pub(super) async fn spot_prices(
        &self,
        region: &str,
        types: &[String],
    ) -> Result<BTreeMap<String, f64>, ProviderError> {
        let mut cache = self.caches.spot.lock().await;
        let missing: Vec<String> =
            types.iter().filter(|t| !cache.contains_key(&(region.to_string(), (*t).clone()))).cloned().collect();
        if !missing.is_empty() {
            let client = self.client(region).await?;
            let mut token: Option<String> = None;
            let mut lowest: BTreeMap<String, f64> = BTreeMap::new();
            loop {
                let out = read(|| async {
                    self.pace(region, "DescribeSpotPriceHistory", Bucket::NonMutating, None).await;
                    client
                        .describe_spot_price_history()
                        .set_instance_types(Some(missing.iter().map(|t| InstanceType::from(t.as_str())).collect()))
                        .product_descriptions("Linux/UNIX")
                        .start_time(DateTime::from(SystemTime::now()))
                        .max_results(1000)
                        .set_next_token(token.clone())
                        .send()
                        .await
                        .map_err(|e| from_sdk("DescribeSpotPriceHistory", e))
                })
                .await?;
                for p in out.spot_price_history() {
                    let (Some(t), Some(price)) =
                        (p.instance_type(), p.spot_price().and_then(|s| s.parse::<f64>().ok()))
                    else {
                        continue;
                    };
                    // A price older than STALE_AFTER is not the price in force (moto answers
                    // prices dated 2006): the catalog's estimate is used instead, and said so.
                    // No date, or one SystemTime cannot hold: the age is unknown and the
                    // price is refused like a stale one. A date slightly ahead of our clock
                    // (skew) counts as fresh.
                    let age = p
                        .timestamp()
                        .and_then(|ts| SystemTime::try_from(*ts).ok())
                        .map(|ts| SystemTime::now().duration_since(ts).unwrap_or_default());
                    if age.is_none_or(|a| a > STALE_AFTER) {
                        let when = p.timestamp().map_or("no date".to_string(), |ts| ts.to_string());
                        self.warn_once(
                            region,
                            &format!(
                                "DescribeSpotPriceHistory gave {} a price dated {when}; using the catalog's spot estimate",
                                t.as_str()
                            ),
                        );
                        continue;
                    }
                    let e = lowest.entry(t.as_str().to_string()).or_insert(f64::MAX);
                    *e = e.min(price);
                }
                match out.next_token() {
                    Some(t) if !t.is_empty() => token = Some(t.to_string()),
                    _ => break,
                }
            }
            for t in &missing {
                cache.insert((region.to_string(), t.clone()), lowest.get(t).copied());
            }
        }
        Ok(types
            .iter()
            .filter_map(|t| Some((t.clone(), cache.get(&(region.to_string(), t.clone())).copied().flatten()?)))
            .collect())
    }
}

#[async_trait::async_trait]
impl PricePort for AwsProvider {
    /// Catalog on-demand prices and live spot prices for a GPU model.
    async fn offers(&self, gpu: &str, region: Option<&str>) -> Result<Vec<Offer>, ProviderError> {
        let models = crate::catalog::resolve_gpu(gpu);
        if models.is_empty() {
            return Err(ProviderError::new(ErrorClass::Invalid, "UnknownGpu", format!("unknown GPU model `{gpu}`")));
        }
        let cat = catalog::catalog();
        let types: Vec<_> =
            cat.instance_types(ProviderKind::Aws).into_iter().filter(|t| models.contains(&t.gpu.as_str())).collect();
        let mut offers = Vec::new();
        for r in cat.regions(ProviderKind::Aws).into_iter().filter(|r| region.is_none_or(|x| x == r.name)) {
            let here: Vec<_> = types.iter().filter(|t| t.offered_in(&r.name)).collect();
            if here.is_empty() {
                continue;
            }
            let names: Vec<String> = here.iter().map(|t| t.name.clone()).collect();
            let live = match self.spot_prices(&r.name, &names).await {
                Ok(p) => p,
                // Asked for this region: say why there is no live price.
                Err(e) if region.is_some() => return Err(e),
                Err(_) => BTreeMap::new(),
            };
            for t in here {
                let zones: Vec<String> = t.zones_in(r).into_iter().map(String::from).collect();
                let quoted = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
                let mut push = |capacity, price_usd, live_price: bool| {
                    offers.push(Offer {
                        provider: ProviderKind::Aws,
                        instance_type: t.name.clone(),
                        gpu: t.gpu.clone(),
                        gpus: t.gpus,
                        region: r.name.clone(),
                        zones: zones.clone(),
                        capacity,
                        price_usd,
                        live_price,
                        as_of: if live_price { quoted.clone() } else { t.as_of.clone() },
                    })
                };
                push(Capacity::OnDemand, t.price_usd(DEFAULT_CNY_PER_USD), false);
                let on_demand = t.price_usd(DEFAULT_CNY_PER_USD);
                match live.get(&t.name) {
                    // A spot price far below or above on-demand is a broken answer, not a
                    // bargain: keep the catalog's estimate and say why.
                    Some(p) if !crate::providers::sane_quote(*p, on_demand) => {
                        self.warn_once(
                            &r.name,
                            &format!(
                                "ignoring the live spot price {p} USD/h of {} (on-demand {on_demand:.4} USD/h); using the catalog's spot estimate",
                                t.name
                            ),
                        );
                        push(Capacity::Spot, t.spot_price_usd(DEFAULT_CNY_PER_USD), false)
                    }
                    Some(p) => push(Capacity::Spot, *p, true),
                    None => push(Capacity::Spot, t.spot_price_usd(DEFAULT_CNY_PER_USD), false),
                }
            }
        }
        sort_offers(&mut offers);
        Ok(offers)
    }
}

/// A spot price older than this is not the price in force.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(2 * 24 * 3600);

#[cfg(test)]
mod tests {
    use super::*;

    fn f(model: &str, count: u32, mib: u64) -> GpuFacts {
        GpuFacts { model: model.into(), count, memory_mib: mib, efa: 0 }
    }

    #[test]
    fn catalog_shapes_are_confirmed_or_refused() {
        assert_eq!(check_type("p4de.24xlarge", Some(&f("A100", 8, 81_920))), Ok(None));
        assert_eq!(check_type("g5.xlarge", Some(&f("A10G", 1, 22_888))), Ok(None), "within 10 %");
        assert!(check_type("g5.xlarge", Some(&f("A10G", 4, 22_888))).is_err(), "count differs");
        assert!(check_type("g5.xlarge", Some(&f("T4", 1, 16_384))).is_err(), "model differs");
        assert!(check_type("g5.xlarge", None).is_err(), "no GPU at all");
        let w = check_type("g5.xlarge", Some(&f("A10G", 1, 12_000))).unwrap();
        assert!(w.is_some_and(|w| w.contains("GiB")));
        assert!(check_type("m5.large", None).unwrap().is_some(), "unknown types are not checked");
    }
}
