//! Offers: the catalog prices of all three clouds for one GPU model.
//!
//! Each offer names the cloud whose catalog it comes from (`provider`), because the sim
//! stands in for all of them and users compare clouds with `gpuplan offers`. Prices are
//! catalog prices in USD (CNY converted at the catalog's default rate; spot estimated with
//! the cloud's typical discount), so `live_price` is always false.

use super::catalog_check::{check_region, invalid};
use super::cloud::SimCloud;
use crate::catalog::{DEFAULT_CNY_PER_USD, catalog, gpu_models_like};
use crate::providers::{Capacity, Offer, ProviderError, sort_offers};
use crate::spec::model::ProviderKind;

impl SimCloud {
    pub(super) fn api_offers(&self, gpu: &str, region: Option<&str>) -> Result<Vec<Offer>, ProviderError> {
        self.begin(&mut self.lock(), "offers")?;
        if let Some(r) = region {
            check_region(r)?;
        }
        let model = resolve_gpu(gpu)?;
        let mut offers = Vec::new();
        for t in catalog().instance_types(ProviderKind::Sim).into_iter().filter(|t| t.gpu == model) {
            let Some(cloud) = catalog().cloud(t.cloud) else { continue };
            for r in cloud.regions.iter().filter(|r| t.offered_in(&r.name) && region.is_none_or(|x| x == r.name)) {
                let zones: Vec<String> = t.zones_in(r).into_iter().map(String::from).collect();
                for (capacity, price) in [
                    (Capacity::OnDemand, t.price_usd(DEFAULT_CNY_PER_USD)),
                    (Capacity::Spot, t.spot_price_usd(DEFAULT_CNY_PER_USD)),
                ] {
                    offers.push(Offer {
                        provider: t.cloud,
                        instance_type: t.name.clone(),
                        gpu: t.gpu.clone(),
                        gpus: t.gpus,
                        region: r.name.clone(),
                        zones: zones.clone(),
                        capacity,
                        price_usd: price,
                        live_price: false,
                        as_of: t.as_of.clone(),
                    });
                }
            }
        }
        offers.extend(super::trace::trace_offers(&self.lock().world, model, region));
        sort_offers(&mut offers);
        Ok(offers)
    }
}

/// The canonical model for `gpu`: its exact name, or an alias naming exactly one model.
fn resolve_gpu(gpu: &str) -> Result<&'static str, ProviderError> {
    if let Some(m) = catalog().gpu_model(gpu) {
        return Ok(m.name);
    }
    match gpu_models_like(gpu).as_slice() {
        [one] => Ok(one.name),
        [] => Err(invalid("SimUnknownGpu", format!("unknown GPU model `{gpu}`"))),
        many => {
            let names: Vec<&str> = many.iter().map(|m| m.name).collect();
            Err(invalid("SimAmbiguousGpu", format!("`{gpu}` could mean {}; name one", names.join(" or "))))
        }
    }
}
