//! Alibaba Cloud's capacity reservations ([`ReservationPort`]): an On-Demand reservation
//! of one zone (`CreateCapacityReservation`, open to any matching pay-as-you-go launch),
//! read back (`DescribeCapacityReservations`) and released (`ReleaseCapacityReservation`).
//! Alibaba sells no fixed prepaid windows like EC2's Capacity Blocks, so a
//! `capacity_block` never reaches here (the spec refuses it on this cloud).

use async_trait::async_trait;
use serde_json::Value;

use super::AlibabaProvider;
use crate::model::reservation::{Offering, OfferingQuery, ReservationKind, ReserveRequest, Reserved};
use crate::providers::reservations::ReservationPort;
use crate::providers::{ErrorClass, ProviderError, TAG_ADDRESS, TAG_MANAGED};

fn p(k: impl Into<String>, v: impl Into<String>) -> (String, String) {
    (k.into(), v.into())
}

/// `2027-01-10T00:00Z` (the minute, as ECS writes and takes times) as ms.
fn ms(text: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339_weak(&text.replace('Z', ":00Z")).or_else(|_| humantime::parse_rfc3339_weak(text));
    u64::try_from(t.ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()
}

fn minute(ms: u64) -> String {
    let t = crate::model::time::rfc3339_ms(ms);
    format!("{}Z", t.get(..16).unwrap_or(&t))
}

/// One `CapacityReservationItem` as gpuplan records it.
fn reserved(item: &Value) -> Reserved {
    let res = &item["AllocatedResources"]["AllocatedResource"][0];
    Reserved {
        id: item["PrivatePoolOptionsId"].as_str().unwrap_or_default().to_string(),
        kind: ReservationKind::OnDemand,
        instance_type: res["InstanceType"].as_str().unwrap_or_default().to_string(),
        count: res["TotalAmount"].as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
        zone: res["zoneId"].as_str().or(res["ZoneId"].as_str()).unwrap_or_default().to_string(),
        start_ms: item["StartTime"].as_str().and_then(ms).unwrap_or(0),
        end_ms: item["EndTime"].as_str().and_then(ms),
        upfront_usd: 0.0,
        usd_per_hour: 0.0,
        state: state(item["Status"].as_str().unwrap_or_default()),
    }
}

/// ECS's status in gpuplan's words: a released reservation is `cancelled`, one being
/// prepared `pending`.
fn state(status: &str) -> String {
    match status.to_lowercase().as_str() {
        "released" => "cancelled".to_string(),
        "preparing" => "pending".to_string(),
        other => other.to_string(),
    }
}

#[async_trait]
impl ReservationPort for AlibabaProvider {
    async fn capacity_block_offerings(
        &self,
        _region: &str,
        _q: &OfferingQuery,
    ) -> Result<Vec<Offering>, ProviderError> {
        Err(ProviderError::new(ErrorClass::Invalid, "Unsupported", "Alibaba Cloud sells no Capacity Blocks"))
    }

    async fn reserve(&self, region: &str, req: &ReserveRequest) -> Result<Reserved, ProviderError> {
        if req.kind != ReservationKind::OnDemand {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "Unsupported",
                "Alibaba Cloud sells no Capacity Blocks",
            ));
        }
        let mut params = vec![
            p("ClientToken", &req.token),
            p("ZoneId.1", &req.zone),
            p("InstanceType", &req.instance_type),
            p("InstanceAmount", req.count.to_string()),
            p("Platform", "linux"),
            p("MatchCriteria", "Open"),
            p("Tag.1.Key", TAG_MANAGED),
            p("Tag.1.Value", "true"),
            p("Tag.2.Key", TAG_ADDRESS),
            p("Tag.2.Value", &req.address),
        ];
        match req.end_ms {
            Some(end) => params.extend([p("EndTimeType", "Limited"), p("EndTime", minute(end))]),
            None => params.push(p("EndTimeType", "Unlimited")),
        }
        let resp = self.client.ecs("CreateCapacityReservation", region, params).await?;
        let id = resp["PrivatePoolOptionsId"].as_str().unwrap_or_default().to_string();
        if id.is_empty() {
            return Err(ProviderError::new(
                ErrorClass::Retryable,
                "EmptyResponse",
                "CreateCapacityReservation answered without a PrivatePoolOptionsId",
            ));
        }
        let found = self.describe_reservations(region, std::slice::from_ref(&id)).await?;
        Ok(found.into_iter().next().unwrap_or(Reserved {
            id,
            kind: ReservationKind::OnDemand,
            instance_type: req.instance_type.clone(),
            count: req.count,
            zone: req.zone.clone(),
            start_ms: 0,
            end_ms: req.end_ms,
            upfront_usd: 0.0,
            usd_per_hour: 0.0,
            state: "pending".into(),
        }))
    }

    async fn describe_reservations(&self, region: &str, ids: &[String]) -> Result<Vec<Reserved>, ProviderError> {
        let mut out = Vec::new();
        for chunk in ids.chunks(100) {
            let list = serde_json::to_string(chunk).unwrap_or_default();
            let params = vec![p("PrivatePoolOptions.Ids", list), p("MaxResults", "100")];
            let resp = self.client.ecs("DescribeCapacityReservations", region, params).await?;
            let items =
                resp["CapacityReservationSet"]["CapacityReservationItem"].as_array().cloned().unwrap_or_default();
            out.extend(items.iter().map(reserved));
        }
        Ok(out)
    }

    async fn cancel_reservation(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.client.ecs("ReleaseCapacityReservation", region, vec![p("PrivatePoolOptions.Id", id)]).await?;
        Ok(())
    }
}
