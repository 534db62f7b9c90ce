//! Reserved capacity on EC2 ([`ReservationPort`]): Capacity Block offerings
//! (`DescribeCapacityBlockOfferings`), purchases (`PurchaseCapacityBlock`), On-Demand
//! Capacity Reservations (`CreateCapacityReservation`, open to any matching launch in its
//! zone), reads (`DescribeCapacityReservations`) and cancels (`CancelCapacityReservation`).
//!
//! `PurchaseCapacityBlock` takes no client token, so a purchase is tagged with the plan's
//! token and looked for under it first: a retried apply finds the block it already paid
//! for instead of buying a second one.

use async_trait::async_trait;
use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_ec2::types::{
    CapacityReservation, CapacityReservationInstancePlatform, CapacityReservationType, EndDateType,
    InstanceMatchCriteria, ResourceType, Tag, TagSpecification,
};

use super::errors::from_sdk;
use super::nodes::filter;
use super::{AwsProvider, Bucket, read};
use crate::model::reservation::{Offering, OfferingQuery, ReservationKind, ReserveRequest, Reserved};
use crate::providers::reservations::ReservationPort;
use crate::providers::{ErrorClass, ProviderError, TAG_ADDRESS, TAG_MANAGED};

/// The tag a purchase carries its idempotency token in.
pub const TAG_TOKEN: &str = "gpuplan:token";
const HOUR_MS: u64 = 3_600_000;
/// EC2's answer for a reservation id it does not know (any more).
const NOT_FOUND: &str = "InvalidCapacityReservationId.NotFound";

fn ms(t: Option<&DateTime>) -> Option<u64> {
    t.and_then(|t| t.to_millis().ok()).and_then(|m| u64::try_from(m).ok())
}

fn at(ms: u64) -> DateTime {
    DateTime::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

fn tags(req: &ReserveRequest) -> TagSpecification {
    let tag = |k: &str, v: &str| Tag::builder().key(k).value(v).build();
    TagSpecification::builder()
        .resource_type(ResourceType::CapacityReservation)
        .tags(tag(TAG_MANAGED, "true"))
        .tags(tag(TAG_ADDRESS, &req.address))
        .tags(tag(TAG_TOKEN, &req.token))
        .build()
}

/// A reservation as gpuplan records it.
fn reserved(r: &CapacityReservation, upfront_usd: f64) -> Reserved {
    let block = matches!(r.reservation_type(), Some(CapacityReservationType::CapacityBlock));
    Reserved {
        id: r.capacity_reservation_id().unwrap_or_default().to_string(),
        kind: if block { ReservationKind::CapacityBlock } else { ReservationKind::OnDemand },
        instance_type: r.instance_type().unwrap_or_default().to_string(),
        count: r.total_instance_count().and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
        zone: r.availability_zone().unwrap_or_default().to_string(),
        start_ms: ms(r.start_date()).unwrap_or(0),
        end_ms: ms(r.end_date()),
        upfront_usd,
        usd_per_hour: 0.0,
        state: r.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
    }
}

impl AwsProvider {
    async fn describe_where(
        &self,
        region: &str,
        ids: &[String],
        filters: Vec<aws_sdk_ec2::types::Filter>,
    ) -> Result<Vec<CapacityReservation>, ProviderError> {
        let client = self.client(region).await?;
        let found = read(|| async {
            self.pace(region, "DescribeCapacityReservations", Bucket::NonMutating, None).await;
            client
                .describe_capacity_reservations()
                .set_capacity_reservation_ids((!ids.is_empty()).then(|| ids.to_vec()))
                .set_filters((!filters.is_empty()).then(|| filters.clone()))
                .send()
                .await
                .map_err(|e| from_sdk("DescribeCapacityReservations", e))
        })
        .await?;
        Ok(found.capacity_reservations().to_vec())
    }
}

fn no_answer(api: &str) -> ProviderError {
    ProviderError::new(ErrorClass::Retryable, "EmptyResponse", format!("{api} answered without a reservation"))
}

#[async_trait]
impl ReservationPort for AwsProvider {
    async fn capacity_block_offerings(&self, region: &str, q: &OfferingQuery) -> Result<Vec<Offering>, ProviderError> {
        let client = self.client(region).await?;
        let found = read(|| async {
            self.pace(region, "DescribeCapacityBlockOfferings", Bucket::NonMutating, None).await;
            client
                .describe_capacity_block_offerings()
                .instance_type(&q.instance_type)
                .instance_count(i32::try_from(q.count).unwrap_or(i32::MAX))
                .capacity_duration_hours(i32::try_from(q.hours).unwrap_or(i32::MAX))
                .start_date_range(at(q.start_ms))
                .send()
                .await
                .map_err(|e| from_sdk("DescribeCapacityBlockOfferings", e))
        })
        .await?;
        let mut out: Vec<Offering> = found
            .capacity_block_offerings()
            .iter()
            .filter(|o| q.zone.as_deref().is_none_or(|z| o.availability_zone() == Some(z)))
            .filter_map(|o| {
                let start_ms = ms(o.start_date())?;
                let hours = o.capacity_block_duration_hours().and_then(|h| u64::try_from(h).ok()).unwrap_or(0);
                Some(Offering {
                    id: o.capacity_block_offering_id()?.to_string(),
                    instance_type: o.instance_type().unwrap_or(&q.instance_type).to_string(),
                    count: o.instance_count().and_then(|n| u32::try_from(n).ok()).unwrap_or(q.count),
                    zone: o.availability_zone().unwrap_or_default().to_string(),
                    start_ms,
                    end_ms: ms(o.end_date()).unwrap_or(start_ms + hours * HOUR_MS),
                    upfront_usd: o.upfront_fee().and_then(|f| f.parse().ok()).unwrap_or(f64::MAX),
                })
            })
            .collect();
        out.sort_by(|a, b| a.upfront_usd.total_cmp(&b.upfront_usd).then(a.start_ms.cmp(&b.start_ms)));
        Ok(out)
    }

    async fn reserve(&self, region: &str, req: &ReserveRequest) -> Result<Reserved, ProviderError> {
        let client = self.client(region).await?;
        match req.kind {
            ReservationKind::CapacityBlock => {
                let mine = vec![filter(&format!("tag:{TAG_TOKEN}"), [req.token.clone()])];
                if let Some(r) = self.describe_where(region, &[], mine).await?.first() {
                    return Ok(reserved(r, 0.0));
                }
                let id = req.offering_id.clone().ok_or_else(|| {
                    ProviderError::new(
                        ErrorClass::Invalid,
                        "MissingOffering",
                        "a Capacity Block purchase names no offering",
                    )
                })?;
                self.pace(region, "PurchaseCapacityBlock", Bucket::Mutating, None).await;
                let out = client
                    .purchase_capacity_block()
                    .capacity_block_offering_id(id)
                    .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
                    .tag_specifications(tags(req))
                    .send()
                    .await
                    .map_err(|e| from_sdk("PurchaseCapacityBlock", e))?;
                let r = out.capacity_reservation().ok_or_else(|| no_answer("PurchaseCapacityBlock"))?;
                Ok(reserved(r, 0.0))
            }
            ReservationKind::OnDemand => {
                self.pace(region, "CreateCapacityReservation", Bucket::Mutating, None).await;
                let mut call = client
                    .create_capacity_reservation()
                    .client_token(&req.token)
                    .instance_type(&req.instance_type)
                    .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
                    .availability_zone(&req.zone)
                    .instance_count(i32::try_from(req.count).unwrap_or(i32::MAX))
                    .instance_match_criteria(InstanceMatchCriteria::Open)
                    .tag_specifications(tags(req));
                call = match req.end_ms {
                    Some(end) => call.end_date_type(EndDateType::Limited).end_date(at(end)),
                    None => call.end_date_type(EndDateType::Unlimited),
                };
                let out = call.send().await.map_err(|e| from_sdk("CreateCapacityReservation", e))?;
                let r = out.capacity_reservation().ok_or_else(|| no_answer("CreateCapacityReservation"))?;
                Ok(reserved(r, 0.0))
            }
        }
    }

    async fn describe_reservations(&self, region: &str, ids: &[String]) -> Result<Vec<Reserved>, ProviderError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let found = match self.describe_where(region, ids, Vec::new()).await {
            Ok(found) => found,
            // One id EC2 no longer knows fails the whole call: asked one by one, the ones
            // it knows answer and the others are left out.
            Err(e) if e.code == NOT_FOUND && ids.len() > 1 => {
                let mut found = Vec::new();
                for id in ids {
                    match self.describe_where(region, std::slice::from_ref(id), Vec::new()).await {
                        Ok(one) => found.extend(one),
                        Err(e) if e.code == NOT_FOUND => {}
                        Err(e) => return Err(e),
                    }
                }
                found
            }
            Err(e) if e.code == NOT_FOUND => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(found.iter().map(|r| reserved(r, 0.0)).collect())
    }

    async fn cancel_reservation(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        let client = self.client(region).await?;
        self.pace(region, "CancelCapacityReservation", Bucket::Mutating, None).await;
        client
            .cancel_capacity_reservation()
            .capacity_reservation_id(id)
            .send()
            .await
            .map_err(|e| from_sdk("CancelCapacityReservation", e))?;
        Ok(())
    }
}
