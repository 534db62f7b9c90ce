//! The price port: catalog offers priced live with CVM `InquiryPriceRunInstances`.

use async_trait::async_trait;

use super::TencentProvider;
use super::client::CVM_VERSION;
use crate::providers::http::catalog_offers;
use crate::providers::{Capacity, ErrorClass, Offer, PricePort, ProviderError};
use crate::spec::model::ProviderKind;

#[async_trait]
impl PricePort for TencentProvider {
    /// Catalog offers priced live with `InquiryPriceRunInstances` (the discounted hourly
    /// price, `UnitPriceDiscount`, in CNY), for pay-as-you-go and spot. The call needs an
    /// image: without the provider block's `image` the catalog prices stand.
    async fn offers(&self, gpu: &str, region: Option<&str>) -> Result<Vec<Offer>, ProviderError> {
        let cfg = self.client.config();
        let offers = catalog_offers(ProviderKind::Tencentcloud, gpu, region, cfg.cny_per_usd);
        let Some(image) = cfg.image.clone() else {
            eprintln!(
                "warning: provider \"{}\" has no `image`, which InquiryPriceRunInstances needs; using catalog prices",
                cfg.name
            );
            return Ok(offers);
        };
        let cny = cfg.cny_per_usd;
        crate::providers::http::quoted_offers(
            ProviderKind::Tencentcloud,
            offers,
            &self.quotes,
            |region, itype, zone, cap| {
                let image = image.clone();
                async move {
                    let mut body = serde_json::json!({
                        "Placement": {"Zone": zone, "ProjectId": 0},
                        "ImageId": image,
                        "InstanceType": itype,
                        "InstanceCount": 1,
                        "InstanceChargeType": if cap == Capacity::Spot { "SPOTPAID" } else { "POSTPAID_BY_HOUR" },
                    });
                    if cap == Capacity::Spot {
                        body["InstanceMarketOptions"] =
                            serde_json::json!({"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}});
                    }
                    let resp = self.client.call("cvm", CVM_VERSION, "InquiryPriceRunInstances", &region, &body).await?;
                    let price = &resp["Price"]["InstancePrice"];
                    let cny_per_hour = price["UnitPriceDiscount"]
                        .as_f64()
                        .or_else(|| price["UnitPrice"].as_f64())
                        .ok_or_else(|| {
                            ProviderError::new(
                                ErrorClass::Fatal,
                                "BadResponse",
                                format!("InquiryPriceRunInstances for {itype} in {zone} returned no hourly price"),
                            )
                        })?;
                    Ok(cny_per_hour / cny)
                }
            },
        )
        .await
    }
}
