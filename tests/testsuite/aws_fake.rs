//! The aws provider through the CLI against a scripted EC2 endpoint, for what moto
//! cannot produce: stock-outs in CreateFleet's `Errors`, throttling, quota and auth
//! failures. Each asserts the executor's fallback or backoff as a user sees it.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::aws::cli::{self, pool_spec, run};
use crate::aws::fake_ec2::{self, FakeEc2, baseline, error, fleet};

fn ids(prefix: &str, n: usize, seq: &AtomicU32) -> Vec<String> {
    (0..n).map(|_| format!("i-{prefix}{:012x}", seq.fetch_add(1, Ordering::SeqCst))).collect()
}

fn count(req: &fake_ec2::Request) -> usize {
    req.params.get("TargetCapacitySpecification.TotalTargetCapacity").and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn spot(req: &fake_ec2::Request) -> bool {
    req.params.get("TargetCapacitySpecification.DefaultTargetCapacityType").map(String::as_str) == Some("spot")
}

fn zone(req: &fake_ec2::Request) -> String {
    req.params.get("LaunchTemplateConfigs.1.Overrides.1.AvailabilityZone").cloned().unwrap_or_default()
}

#[test]
fn spot_stock_out_in_fleet_errors_falls_back_to_other_zones_then_on_demand() {
    let seq = AtomicU32::new(1);
    let fake = FakeEc2::start(move |req, _| {
        if let Some(r) = baseline(req) {
            return r;
        }
        match req.action.as_str() {
            // Every spot pool is out of stock; on-demand launches.
            "CreateFleet" if spot(req) => fleet(
                &[],
                "spot",
                &[("InsufficientInstanceCapacity", "There is no Spot capacity available that matches your request.")],
            ),
            "CreateFleet" => fleet(&ids("0d", count(req), &seq), "on-demand", &[]),
            other => error(400, "InvalidAction", &format!("the fake does not know {other}")),
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("main.hcl"),
        pool_spec(&fake.url, "us-east-1", &["us-east-1a", "us-east-1b"], 2, 0, 100, ""),
    )
    .unwrap();
    let r = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let fleets = fake.actions("CreateFleet");
    let tried: Vec<(bool, String)> = fleets.iter().map(|f| (spot(f), zone(f))).collect();
    // One spot node per zone was planned; each tries its zone, then the other, then on-demand.
    assert!(tried.iter().filter(|(s, _)| *s).count() >= 2, "{tried:?}");
    assert!(tried.contains(&(true, "us-east-1a".into())) && tried.contains(&(true, "us-east-1b".into())), "{tried:?}");
    let od: usize = fleets.iter().filter(|f| !spot(f)).map(count).sum();
    assert_eq!(od, 2, "both nodes fell back to on-demand: {tried:?}");
    assert!(r.stderr.contains("falling back to on-demand"), "{}", r.stderr);
    let state = std::fs::read_to_string(tmp.path().join("state/default.json")).unwrap();
    assert_eq!(state.matches("\"capacity\": \"on-demand\"").count(), 2, "{state}");
    // Each launch carried the ownership tags and a plan-derived idempotency token.
    for f in &fleets {
        let token = f.params.get("ClientToken").expect("ClientToken");
        assert!(token.starts_with("gp-") && token.len() <= 64, "{token}");
        let tags: Vec<&String> = f.params.iter().filter(|(k, _)| k.ends_with(".Key")).map(|(_, v)| v).collect();
        assert!(
            tags.iter().any(|t| *t == "gpuplan:managed") && tags.iter().any(|t| *t == "gpuplan:lineage"),
            "{tags:?}"
        );
    }
}

#[test]
fn request_limit_exceeded_backs_off_and_retries_with_the_same_token() {
    let seq = AtomicU32::new(1);
    let fake = FakeEc2::start(move |req, before| {
        if let Some(r) = baseline(req) {
            return r;
        }
        let earlier = before.iter().filter(|r| r.action == "CreateFleet").count();
        match req.action.as_str() {
            "CreateFleet" if earlier < 2 => error(503, "RequestLimitExceeded", "Request limit exceeded."),
            "CreateFleet" => fleet(&ids("0e", count(req), &seq), "on-demand", &[]),
            other => error(400, "InvalidAction", other),
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), pool_spec(&fake.url, "us-east-1", &["us-east-1a"], 3, 3, 0, ""))
        .unwrap();
    let r = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let fleets = fake.actions("CreateFleet");
    assert_eq!(fleets.len(), 3, "two throttled calls, then success: {fleets:?}");
    let tokens: Vec<&String> = fleets.iter().map(|f| f.params.get("ClientToken").unwrap()).collect();
    assert!(tokens.iter().all(|t| *t == tokens[0]), "a retry reuses its token: {tokens:?}");
    // Throttled retries back off (≥ 250 ms, half of the first 500 ms step), growing.
    let gap1 = fleets[1].at - fleets[0].at;
    let gap2 = fleets[2].at - fleets[1].at;
    assert!(gap1.as_millis() >= 250, "{gap1:?}");
    assert!(gap2 > gap1 / 2, "{gap1:?} then {gap2:?}");
    let state = std::fs::read_to_string(tmp.path().join("state/default.json")).unwrap();
    assert_eq!(state.matches("\"id\": \"i-0e").count(), 3, "{state}");
}

#[test]
fn quota_errors_in_fleet_errors_fail_with_a_service_quotas_hint() {
    let fake = FakeEc2::start(move |req, _| {
        if let Some(r) = baseline(req) {
            return r;
        }
        match req.action.as_str() {
            "CreateFleet" => fleet(
                &[],
                "on-demand",
                &[(
                    "VcpuLimitExceeded",
                    "You have requested more vCPU capacity than your current vCPU limit of 0 allows",
                )],
            ),
            other => error(400, "InvalidAction", other),
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), pool_spec(&fake.url, "us-east-1", &["us-east-1a"], 1, 1, 0, ""))
        .unwrap();
    let r = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("VcpuLimitExceeded"), "{}", r.stderr);
    assert!(r.stderr.contains("Service Quotas"), "{}", r.stderr);
    assert_eq!(fake.actions("CreateFleet").len(), 1, "a quota is not retried");
}

#[test]
fn auth_failure_stops_the_plan_with_a_credentials_hint() {
    let fake = FakeEc2::start(|_, _| {
        error(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
    });
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), pool_spec(&fake.url, "us-east-1", &["us-east-1a"], 1, 1, 0, ""))
        .unwrap();
    let r = run(tmp.path(), &["plan"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("AuthFailure"), "{}", r.stderr);
    assert!(r.stderr.contains("AWS_ACCESS_KEY_ID"), "{}", r.stderr);
    assert_eq!(fake.actions("DescribeInstances").len(), 1, "auth failures are not retried");
    assert!(!r.stderr.contains(cli::SECRET_KEY) && !r.stdout.contains(cli::SECRET_KEY));
}

#[test]
fn spot_price_too_low_is_reported_not_retried() {
    let fake = FakeEc2::start(move |req, _| {
        if let Some(r) = baseline(req) {
            return r;
        }
        match req.action.as_str() {
            "CreateFleet" => fleet(
                &[],
                "spot",
                &[(
                    "SpotMaxPriceTooLow",
                    "Your Spot request price of 0.01 is lower than the minimum required Spot request fulfillment price of 0.4.",
                )],
            ),
            other => error(400, "InvalidAction", other),
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let spec = pool_spec(&fake.url, "us-east-1", &["us-east-1a"], 1, 0, 100, "")
        .replace("fallback       = \"on_demand\"", "fallback       = \"fail\"\n    max_spot_price = 0.01");
    std::fs::write(tmp.path().join("main.hcl"), spec).unwrap();
    let r = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("SpotMaxPriceTooLow") && r.stderr.contains("max_spot_price"), "{}", r.stderr);
    let f = &fake.actions("CreateFleet")[0];
    assert_eq!(f.params.get("LaunchTemplateConfigs.1.Overrides.1.MaxPrice").map(String::as_str), Some("0.01"));
}
