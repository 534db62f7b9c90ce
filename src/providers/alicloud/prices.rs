//! The price port: catalog offers priced live with ECS `DescribePrice`.

use async_trait::async_trait;

use super::AlibabaProvider;
use crate::providers::http::catalog_offers;
use crate::providers::{Capacity, ErrorClass, Offer, PricePort, ProviderError};
use crate::spec::model::ProviderKind;

#[async_trait]
impl PricePort for AlibabaProvider {
    /// Catalog offers priced live with `DescribePrice` (the instance line's `TradePrice`
    /// per hour; `SpotAsPriceGo` for spot), in CNY or USD as the account's site answers.
    async fn offers(&self, gpu: &str, region: Option<&str>) -> Result<Vec<Offer>, ProviderError> {
        let cny = self.client.config().cny_per_usd;
        let offers = catalog_offers(ProviderKind::Alicloud, gpu, region, cny);
        crate::providers::http::quoted_offers(
            ProviderKind::Alicloud,
            offers,
            &self.quotes,
            |region, itype, zone, cap| async move {
                let params: Vec<(String, String)> = [
                    ("ResourceType", "instance"),
                    ("InstanceType", itype.as_str()),
                    ("ZoneId", zone.as_str()),
                    ("SpotStrategy", if cap == Capacity::Spot { "SpotAsPriceGo" } else { "NoSpot" }),
                    ("PriceUnit", "Hour"),
                    ("Period", "1"),
                    ("Amount", "1"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
                let resp = self.client.ecs("DescribePrice", &region, params).await?;
                let price = &resp["PriceInfo"]["Price"];
                // The total includes the system disk: the instance's own line when listed.
                let line = price["DetailInfos"]["DetailInfo"]
                    .as_array()
                    .and_then(|d| d.iter().find(|l| l["Resource"] == "instanceType"))
                    .and_then(|l| l["TradePrice"].as_f64());
                let amount = line.or_else(|| price["TradePrice"].as_f64()).ok_or_else(|| {
                    ProviderError::new(
                        ErrorClass::Fatal,
                        "BadResponse",
                        format!("DescribePrice for {itype} in {zone} returned no TradePrice"),
                    )
                })?;
                Ok(if price["Currency"] == "USD" { amount } else { amount / cny })
            },
        )
        .await
    }
}
