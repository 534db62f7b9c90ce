//! Reservations on AWS (issue 52): moto answers `DescribeCapacityBlockOfferings`,
//! `PurchaseCapacityBlock` and the Capacity Reservation calls with 500, so a scripted
//! front answers them (as the SSM agent listing's does) and sends every other call to
//! moto. The plan takes the offering within `max_price_usd`, apply buys the block and an
//! On-Demand Capacity Reservation under the plan's token, and destroy cancels only the
//! one that can be cancelled.

use std::sync::{Arc, Mutex};

use crate::aws::cli::run;
use crate::aws::fake_ec2::{FakeEc2, error, forward, ok};

fn moto() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!("GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`"),
    }
}

const OFFERINGS: &str = "<capacityBlockOfferingSet>\
<item><capacityBlockOfferingId>cbr-0cheap</capacityBlockOfferingId><instanceType>p5.48xlarge</instanceType>\
<availabilityZone>us-east-1a</availabilityZone><instanceCount>2</instanceCount>\
<startDate>2027-01-10T11:30:00.000Z</startDate><endDate>2027-01-17T11:30:00.000Z</endDate>\
<capacityBlockDurationHours>168</capacityBlockDurationHours><upfrontFee>28450.00</upfrontFee>\
<currencyCode>USD</currencyCode><tenancy>default</tenancy></item>\
<item><capacityBlockOfferingId>cbr-0dear</capacityBlockOfferingId><instanceType>p5.48xlarge</instanceType>\
<availabilityZone>us-east-1a</availabilityZone><instanceCount>2</instanceCount>\
<startDate>2027-01-09T11:30:00.000Z</startDate><endDate>2027-01-16T11:30:00.000Z</endDate>\
<capacityBlockDurationHours>168</capacityBlockDurationHours><upfrontFee>61000.00</upfrontFee>\
<currencyCode>USD</currencyCode><tenancy>default</tenancy></item>\
</capacityBlockOfferingSet>";

fn reservation(id: &str, kind: &str, count: u32, zone: &str, state: &str, window: &str) -> String {
    format!(
        "<capacityReservationId>{id}</capacityReservationId><instanceType>p5.48xlarge</instanceType>\
<availabilityZone>{zone}</availabilityZone><totalInstanceCount>{count}</totalInstanceCount>\
<state>{state}</state>{window}<reservationType>{kind}</reservationType>"
    )
}

/// What the front's EC2 holds: each reservation's id → its state (`active`,
/// `cancelled`, ...); an id left out is one EC2 does not know.
type Held = Arc<Mutex<std::collections::BTreeMap<String, String>>>;

const BLOCK_WINDOW: &str = "<startDate>2027-01-10T11:30:00.000Z</startDate><endDate>2027-01-17T11:30:00.000Z</endDate>";
const ODCR_WINDOW: &str = "<startDate>2026-12-07T00:00:00.000Z</startDate>";

/// `DescribeCapacityReservations` of the ids asked (`CapacityReservationId.N`), as the
/// front holds them; an unknown id fails the call, as on EC2.
fn describe_ids(req: &crate::aws::fake_ec2::Request, held: &Held) -> crate::aws::fake_ec2::Reply {
    let held = held.lock().unwrap();
    let mut items = String::new();
    for id in req.params.iter().filter(|(k, _)| k.starts_with("CapacityReservationId.")).map(|(_, v)| v) {
        let Some(state) = held.get(id) else {
            return error(
                400,
                "InvalidCapacityReservationId.NotFound",
                &format!("The reservation '{id}' does not exist"),
            );
        };
        let one = match id.as_str() {
            "cr-0block" => reservation(id, "capacity-block", 2, "us-east-1a", state, BLOCK_WINDOW),
            _ => reservation(id, "default", 1, "us-east-1b", state, ODCR_WINDOW),
        };
        items += &format!("<item>{one}</item>");
    }
    ok(&req.action, &format!("<capacityReservationSet>{items}</capacityReservationSet>"))
}

/// The front: the reservation calls answered here (and counted in `cancelled`), the rest
/// by moto.
fn front(cancelled: Arc<Mutex<Vec<String>>>, held: Held) -> FakeEc2 {
    let host = moto().trim_start_matches("http://").trim_end_matches('/').to_string();
    FakeEc2::start(move |req, seen| match req.action.as_str() {
        "DescribeCapacityBlockOfferings" => ok(&req.action, OFFERINGS),
        "DescribeCapacityReservations" if req.params.keys().any(|k| k.starts_with("CapacityReservationId.")) => {
            describe_ids(req, &held)
        }
        "DescribeCapacityReservations" => {
            // Asked under the purchase's token before buying: bought already only when a
            // purchase went through before.
            let bought = seen.iter().any(|r| r.action == "PurchaseCapacityBlock");
            let inner = if bought {
                format!(
                    "<item>{}</item>",
                    reservation("cr-0block", "capacity-block", 2, "us-east-1a", "scheduled", BLOCK_WINDOW)
                )
            } else {
                String::new()
            };
            ok(&req.action, &format!("<capacityReservationSet>{inner}</capacityReservationSet>"))
        }
        "PurchaseCapacityBlock" => {
            held.lock().unwrap().insert("cr-0block".into(), "scheduled".into());
            ok(
                &req.action,
                &format!(
                    "<capacityReservation>{}</capacityReservation>",
                    reservation("cr-0block", "capacity-block", 2, "us-east-1a", "payment-pending", BLOCK_WINDOW)
                ),
            )
        }
        "CreateCapacityReservation" => {
            held.lock().unwrap().insert("cr-0odcr".into(), "active".into());
            ok(
                &req.action,
                &format!(
                    "<capacityReservation>{}</capacityReservation>",
                    reservation("cr-0odcr", "default", 1, "us-east-1b", "active", ODCR_WINDOW)
                ),
            )
        }
        "CancelCapacityReservation" => {
            let id = req.params.get("CapacityReservationId").cloned().unwrap_or_default();
            held.lock().unwrap().insert(id.clone(), "cancelled".into());
            cancelled.lock().unwrap().push(id);
            ok(&req.action, "<return>true</return>")
        }
        _ => forward(&host, req),
    })
}

fn spec(endpoint: &str) -> String {
    format!(
        r#"provider "aws" {{
  region   = "us-east-1"
  endpoint = "{endpoint}"
}}

reservation "h100_block" {{
  provider       = "aws"
  zone           = "us-east-1a"
  kind           = "capacity_block"
  instance_type  = "p5.48xlarge"
  instance_count = 2
  start          = "2027-01-09T00:00:00Z"
  duration       = "7d"
  max_price_usd  = 30000
  commit         = true
}}

reservation "odcr" {{
  provider       = "aws"
  zone           = "us-east-1b"
  kind           = "on_demand"
  instance_type  = "p5.48xlarge"
  instance_count = 1
}}
"#
    )
}

#[test]
fn capacity_blocks_and_odcrs_are_bought_through_ec2_and_only_the_odcr_is_cancelled() {
    let cancelled = Arc::new(Mutex::new(Vec::new()));
    let front = front(cancelled.clone(), Held::default());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), spec(&front.url)).unwrap();

    let r = run(dir, &["plan"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("commits 28,450.00 USD up front, cannot be cancelled, ends 2027-01-17 11:30Z"),
        "the offering within max_price_usd, not the earlier dearer one:\n{}",
        r.stdout
    );
    let asked = front.actions("DescribeCapacityBlockOfferings");
    let p = &asked.last().expect("offerings asked").params;
    assert_eq!(p.get("InstanceType").map(String::as_str), Some("p5.48xlarge"));
    assert_eq!(p.get("InstanceCount").map(String::as_str), Some("2"));
    assert_eq!(p.get("CapacityDurationHours").map(String::as_str), Some("168"));

    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let bought = front.actions("PurchaseCapacityBlock");
    assert_eq!(bought.len(), 1, "one purchase");
    let p = &bought[0].params;
    assert_eq!(p.get("CapacityBlockOfferingId").map(String::as_str), Some("cbr-0cheap"));
    assert!(p.iter().any(|(k, v)| k.ends_with(".Key") && v == "gpuplan:token"), "tagged with its token: {p:?}");
    let created = front.actions("CreateCapacityReservation");
    assert_eq!(created.len(), 1);
    let p = &created[0].params;
    assert!(p.get("ClientToken").is_some_and(|t| t.starts_with("gp-")), "{p:?}");
    assert_eq!(p.get("InstanceCount").map(String::as_str), Some("1"));
    assert_eq!(p.get("AvailabilityZone").map(String::as_str), Some("us-east-1b"));
    assert_eq!(p.get("EndDateType").map(String::as_str), Some("unlimited"));
    let state: serde_json::Value = crate::state_plain::read(&dir.join("state/default.json"));
    let block = &state["resources"]["reservation.h100_block"]["reservation"];
    assert_eq!(block["id"], "cr-0block");
    assert_eq!(block["upfront_usd"], 28450.0, "the price paid is recorded: {block}");
    assert_eq!(state["resources"]["reservation.odcr"]["reservation"]["id"], "cr-0odcr");

    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(*cancelled.lock().unwrap(), vec!["cr-0odcr".to_string()], "the Capacity Block is never cancelled");
    let state: serde_json::Value = crate::state_plain::read(&dir.join("state/default.json"));
    assert!(state["resources"].as_object().is_none_or(|m| m.is_empty()), "{state}");
}

#[test]
fn refresh_reads_reservations_back_and_one_cancelled_or_gone_is_no_longer_kept() {
    let cancelled = Arc::new(Mutex::new(Vec::new()));
    let held = Held::default();
    let front = front(cancelled.clone(), held.clone());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), spec(&front.url)).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("keep reservation.odcr") && r.stdout.contains("keep reservation.h100_block"));
    let asked = front.actions("DescribeCapacityReservations");
    let p = &asked.last().expect("read back").params;
    assert_eq!(p.get("CapacityReservationId.1").map(String::as_str), Some("cr-0block"), "{p:?}");
    assert_eq!(p.get("CapacityReservationId.2").map(String::as_str), Some("cr-0odcr"), "{p:?}");

    // Cancelled in the console; the block gone from EC2 (an id it no longer knows).
    held.lock().unwrap().insert("cr-0odcr".into(), "cancelled".into());
    held.lock().unwrap().remove("cr-0block");
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("keep reservation"), "{}", r.stdout);
    assert!(r.stdout.contains("ended reservation.odcr"), "{}", r.stdout);
    assert!(r.stdout.contains("cancelled outside gpuplan: holds no capacity"), "{}", r.stdout);
    assert!(r.stdout.contains("ended reservation.h100_block"), "{}", r.stdout);
    assert!(r.stdout.contains("no longer known to the cloud: holds no capacity"), "{}", r.stdout);

    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("state/default.json")).unwrap()).unwrap();
    assert_eq!(state["resources"]["reservation.odcr"]["reservation"]["state"], "cancelled");
    assert_eq!(state["resources"]["reservation.h100_block"]["reservation"]["state"], "gone");
    assert_eq!(state["resources"]["reservation.h100_block"]["reservation"]["upfront_usd"], 28450.0, "what was paid");
    assert!(front.actions("PurchaseCapacityBlock").len() == 1, "nothing bought in their place");

    // Destroyed: nothing left to cancel.
    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(cancelled.lock().unwrap().is_empty(), "an ended reservation is not cancelled again");
}
