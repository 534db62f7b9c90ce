//! A pool's nodes launched into its Capacity Block on AWS (issue 52 item 5): moto
//! answers the reservation calls with 500, so a scripted front answers them and
//! forwards the rest (`RunInstances` included, recorded) to moto. The reserved batch is
//! one `RunInstances` naming the reservation (`CapacityReservationTarget`) on the
//! Capacity Block market, in the reservation's zone; its nodes carry the reservation's
//! id and count in the reservation's `used`.

use std::sync::{Arc, Mutex};

use crate::aws::cli::run;
use crate::aws::fake_ec2::{FakeEc2, forward, ok};

fn moto() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!("GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`"),
    }
}

/// A window open now (the AWS provider's clock is the wall clock) until 2030.
const WINDOW: &str = "<startDate>2026-01-01T00:00:00.000Z</startDate><endDate>2030-01-01T00:00:00.000Z</endDate>";

fn block(state: &str) -> String {
    format!(
        "<capacityReservationId>cr-0block</capacityReservationId><instanceType>p5.48xlarge</instanceType>\
<availabilityZone>us-east-1a</availabilityZone><totalInstanceCount>2</totalInstanceCount>\
<state>{state}</state>{WINDOW}<reservationType>capacity-block</reservationType>"
    )
}

fn front(bought: Arc<Mutex<bool>>) -> FakeEc2 {
    let host = moto().trim_start_matches("http://").trim_end_matches('/').to_string();
    FakeEc2::start(move |req, _| match req.action.as_str() {
        "DescribeCapacityBlockOfferings" => ok(
            &req.action,
            &format!(
                "<capacityBlockOfferingSet><item><capacityBlockOfferingId>cbr-0now</capacityBlockOfferingId>\
<instanceType>p5.48xlarge</instanceType><availabilityZone>us-east-1a</availabilityZone>\
<instanceCount>2</instanceCount>{WINDOW}<capacityBlockDurationHours>168</capacityBlockDurationHours>\
<upfrontFee>28450.00</upfrontFee><currencyCode>USD</currencyCode></item></capacityBlockOfferingSet>"
            ),
        ),
        "DescribeCapacityReservations" => {
            let inner =
                if *bought.lock().unwrap() { format!("<item>{}</item>", block("active")) } else { String::new() };
            ok(&req.action, &format!("<capacityReservationSet>{inner}</capacityReservationSet>"))
        }
        "PurchaseCapacityBlock" => {
            *bought.lock().unwrap() = true;
            ok(&req.action, &format!("<capacityReservation>{}</capacityReservation>", block("active")))
        }
        // moto takes any market type for spot; EC2 answers `capacity-block` for the
        // instances of a Capacity Block (this test launches no spot instance).
        "RunInstances" | "DescribeInstances" => {
            let mut reply = forward(&host, req);
            reply.body = reply.body.replace(
                "<instanceLifecycle>spot</instanceLifecycle>",
                "<instanceLifecycle>capacity-block</instanceLifecycle>",
            );
            reply
        }
        _ => forward(&host, req),
    })
}

fn spec(endpoint: &str, desired: u32) -> String {
    format!(
        r#"provider "aws" {{
  region   = "us-east-1"
  endpoint = "{endpoint}"
  image    = "ami-0123456789abcdef0"
}}

reservation "h100_block" {{
  provider       = "aws"
  zone           = "us-east-1a"
  kind           = "capacity_block"
  instance_type  = "p5.48xlarge"
  instance_count = 2
  start          = "2026-01-01T00:00:00Z"
  duration       = "7d"
  max_price_usd  = 30000
  commit         = true
}}

gpu_pool "train" {{
  provider       = "aws"
  zones          = ["us-east-1a"]
  gpu            = "H100"
  gpus_per_node  = 8
  instance_types = ["p5.48xlarge"]
  nodes {{
    min     = 0
    desired = {desired}
    max     = 4
  }}
  capacity {{
    reservation = reservation.h100_block
  }}
}}
"#
    )
}

#[test]
fn a_pool_launches_into_its_capacity_block_with_run_instances_on_the_capacity_block_market() {
    let front = front(Arc::new(Mutex::new(false)));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), spec(&front.url, 0)).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    std::fs::write(dir.join("main.hcl"), spec(&front.url, 2)).unwrap();
    let r = run(dir, &["plan", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let pool = plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == "gpu_pool.train").unwrap();
    let batch = &pool["pool"]["creates"][0];
    assert_eq!(batch["reservation"]["id"], "cr-0block", "{pool:#}");
    assert_eq!(batch["count"], 2, "{pool:#}");
    assert_eq!(plan["reservations"][0]["used"], 2, "{plan:#}");

    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let launched = front.actions("RunInstances");
    assert_eq!(launched.len(), 1, "one call for the reserved batch");
    let p = &launched[0].params;
    let get = |k: &str| p.get(k).map(String::as_str);
    assert_eq!(
        get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"),
        Some("cr-0block"),
        "{p:?}"
    );
    assert_eq!(get("InstanceMarketOptions.MarketType"), Some("capacity-block"), "{p:?}");
    assert_eq!(get("MaxCount"), Some("2"), "{p:?}");
    assert!(get("ClientToken").is_some_and(|t| t.starts_with("gp-")), "{p:?}");
    assert!(front.actions("CreateFleet").is_empty(), "not the open market");
    let state: serde_json::Value = crate::state_plain::read(&dir.join("state/default.json"));
    let nodes = state["resources"]["gpu_pool.train"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{state:#}");
    assert!(nodes.iter().all(|n| n["tags"]["gpuplan:reservation"] == "cr-0block"), "{state:#}");
    assert!(nodes.iter().all(|n| n["capacity"] == "reserved"), "recorded as reserved capacity: {state:#}");

    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "settled: {}\n{}", r.stdout, r.stderr);
}

/// With `fabric = "efa"`, the reserved batch's `RunInstances` names its 32 EFA interfaces
/// (p5.48xlarge, as `DescribeInstanceTypes` says) with their subnet and security group,
/// and no subnet beside them.
#[tokio::test(flavor = "multi_thread")]
async fn a_reserved_batch_with_efa_names_its_interfaces_in_run_instances() {
    let c = crate::efa_moto::client("us-east-1").await;
    let sg = crate::efa_moto::security_group(&c, &format!("efa-reserved-{}", std::process::id())).await;
    let front = front(Arc::new(Mutex::new(false)));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let efa = |desired: u32| {
        spec(&front.url, desired)
            .replace(
                "  image    = \"ami-0123456789abcdef0\"\n",
                &format!("  image    = \"ami-0123456789abcdef0\"\n  security_groups = [\"{sg}\"]\n"),
            )
            .replace("  capacity {\n", "  network {\n    fabric = \"efa\"\n  }\n  capacity {\n")
    };
    std::fs::write(dir.join("main.hcl"), efa(0)).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    std::fs::write(dir.join("main.hcl"), efa(2)).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    let launched = front.actions("RunInstances");
    assert_eq!(launched.len(), 1, "one call for the reserved batch");
    let p = &launched[0].params;
    let get = |k: &str| p.get(k).map(String::as_str);
    assert_eq!(get("SubnetId"), None, "the subnet goes in the interfaces: {p:?}");
    let subnet = get("NetworkInterface.1.SubnetId").expect("the first interface names its subnet");
    for i in 1..=32 {
        let at = |k: &str| get(&format!("NetworkInterface.{i}.{k}"));
        assert_eq!(at("InterfaceType"), Some("efa"), "{i}: {p:?}");
        assert_eq!(at("NetworkCardIndex"), Some((i - 1).to_string().as_str()), "{i}");
        assert_eq!(at("DeviceIndex"), Some(if i == 1 { "0" } else { "1" }), "{i}");
        assert_eq!(at("SubnetId"), Some(subnet), "{i}");
        assert_eq!(at("SecurityGroupId.1"), Some(sg.as_str()), "{i}");
    }
    assert_eq!(get("NetworkInterface.33.DeviceIndex"), None, "as many as the type takes");
    assert_eq!(front.actions("AuthorizeSecurityGroupIngress").len(), 1, "the group opened to itself");
    let state: serde_json::Value = crate::state_plain::read(&dir.join("state/default.json"));
    assert_eq!(state["resources"]["gpu_pool.train"]["nodes"].as_array().unwrap().len(), 2, "{state:#}");
}
