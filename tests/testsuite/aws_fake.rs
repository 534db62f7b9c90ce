//! The aws provider through the CLI against a scripted EC2 endpoint, for what moto
//! cannot produce: stock-outs in CreateFleet's `Errors`, throttling, quota and auth
//! failures. Each asserts the executor's fallback or backoff as a user sees it.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::aws::cli::{self, pool_spec, run};
use crate::aws::fake_ec2::{self, FakeEc2, baseline, error, fleet, fleet_in};

fn ids(prefix: &str, n: usize, seq: &AtomicU32) -> Vec<String> {
    (0..n).map(|_| format!("i-{prefix}{:012x}", seq.fetch_add(1, Ordering::SeqCst))).collect()
}

fn count(req: &fake_ec2::Request) -> usize {
    req.params.get("TargetCapacitySpecification.TotalTargetCapacity").and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn spot(req: &fake_ec2::Request) -> bool {
    req.params.get("TargetCapacitySpecification.DefaultTargetCapacityType").map(String::as_str) == Some("spot")
}

/// The zones a fleet's overrides name, sorted and deduplicated.
fn zones(req: &fake_ec2::Request) -> Vec<String> {
    let mut z: Vec<String> = req
        .params
        .iter()
        .filter(|(k, _)| k.starts_with("LaunchTemplateConfigs.1.Overrides.") && k.ends_with(".AvailabilityZone"))
        .map(|(_, v)| v.clone())
        .collect();
    z.sort();
    z.dedup();
    z
}

#[test]
fn spot_stock_out_in_fleet_errors_falls_back_to_on_demand_over_all_zones() {
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
    let tried: Vec<(bool, usize, Vec<String>)> = fleets.iter().map(|f| (spot(f), count(f), zones(f))).collect();
    // One spot fleet over both zones for both nodes, then one on-demand fleet for both.
    let both = vec!["us-east-1a".to_string(), "us-east-1b".to_string()];
    assert_eq!(tried, [(true, 2, both.clone()), (false, 2, both)], "{tried:?}");
    assert!(
        r.stderr.contains("had no spot capacity; 2 on-demand nodes placed in us-east-1a, us-east-1b"),
        "{}",
        r.stderr
    );
    let state: serde_json::Value = crate::state_plain::read(&tmp.path().join("state/default.json"));
    let nodes = state["resources"]["gpu_pool.train"]["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.iter().filter(|n| n["capacity"] == "on-demand").count(), 2, "{state}");
    // The spend ledger opened one line per node, on-demand priced.
    let ledger = state["spend"].as_object().expect("a spend ledger");
    assert_eq!(ledger.len(), 2, "{state}");
    assert!(ledger.values().all(|e| e["capacity"] == "on-demand" && e["usd_per_hour"].as_f64() > Some(0.0)));
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

/// The account's spot quota used up is a spot shortage: with `fallback = "on_demand"` the
/// nodes launch on-demand, whether EC2 says so in the fleet's `Errors` or as the call's error.
#[test]
fn spot_quota_exceeded_falls_back_to_on_demand() {
    for whole_call in [false, true] {
        let seq = AtomicU32::new(1);
        let fake = FakeEc2::start(move |req, _| {
            if let Some(r) = baseline(req) {
                return r;
            }
            let quota = "Max spot instance count exceeded";
            match req.action.as_str() {
                "CreateFleet" if spot(req) && whole_call => error(400, "MaxSpotInstanceCountExceeded", quota),
                "CreateFleet" if spot(req) => fleet(&[], "spot", &[("MaxSpotInstanceCountExceeded", quota)]),
                "CreateFleet" => fleet(&ids("0f", count(req), &seq), "on-demand", &[]),
                other => error(400, "InvalidAction", other),
            }
        });
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("main.hcl"), pool_spec(&fake.url, "us-east-1", &["us-east-1a"], 2, 0, 100, ""))
            .unwrap();
        let r = run(tmp.path(), &["apply", "--auto-approve"]);
        assert_eq!(r.code, 0, "whole call {whole_call}:\n{}\n{}", r.stdout, r.stderr);
        let tried: Vec<(bool, usize)> = fake.actions("CreateFleet").iter().map(|f| (spot(f), count(f))).collect();
        assert_eq!(tried, [(true, 2), (false, 2)], "whole call {whole_call}");
        assert!(r.stderr.contains("had no spot capacity; 2 on-demand nodes placed in us-east-1a"), "{}", r.stderr);
        let state: serde_json::Value = crate::state_plain::read(&tmp.path().join("state/default.json"));
        let nodes = state["resources"]["gpu_pool.train"]["nodes"].as_array().expect("nodes");
        assert_eq!(nodes.iter().filter(|n| n["capacity"] == "on-demand").count(), 2, "{state}");
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
    let state = crate::state_plain::read(&tmp.path().join("state/default.json"));
    let nodes = state["resources"]["gpu_pool.train"]["nodes"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        nodes.iter().filter(|n| n["id"].as_str().is_some_and(|id| id.starts_with("i-0e"))).count(),
        3,
        "{state}"
    );
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

/// No credentials anywhere: `check` says none were found and where it looked (nothing was
/// sent, so nothing was refused), with the hint once.
#[test]
fn check_without_credentials_says_none_were_found_and_hints_once() {
    let fake = FakeEc2::start(|_, _| error(401, "AuthFailure", "the fake was reached"));
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), pool_spec(&fake.url, "us-east-1", &["us-east-1a"], 1, 1, 0, ""))
        .unwrap();
    let r = cli::run_as(tmp.path(), &["check"], None);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("no AWS credentials found (looked in AWS_ACCESS_KEY_ID"), "{}", r.stdout);
    assert!(r.stdout.contains("~/.aws/credentials"), "{}", r.stdout);
    assert!(!r.stdout.contains("refused"), "{}", r.stdout);
    assert_eq!(r.stdout.matches("hint").count(), 1, "{}", r.stdout);
    assert!(fake.requests().is_empty(), "nothing is sent without credentials");
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

/// A spot fleet that launches `got` of its nodes in us-east-1b and reports a stock-out
/// for the rest; on-demand fleets launch everything in us-east-1a.
fn short_spot(got: usize) -> FakeEc2 {
    let seq = AtomicU32::new(1);
    FakeEc2::start(move |req, _| {
        if let Some(r) = baseline(req) {
            return r;
        }
        match req.action.as_str() {
            "CreateFleet" if spot(req) => fleet_in(
                &ids("05", got.min(count(req)), &seq),
                "spot",
                Some("us-east-1b"),
                &[("InsufficientInstanceCapacity", "There is not enough capacity to fulfill your request.")],
            ),
            "CreateFleet" => fleet_in(&ids("0d", count(req), &seq), "on-demand", Some("us-east-1a"), &[]),
            other => error(400, "InvalidAction", other),
        }
    })
}

/// Apply a 5-node all-spot pool over two zones with `fallback`; the fake, the run and the
/// state's nodes as (id, capacity, zone).
fn apply_short_spot(fallback: &str) -> (FakeEc2, cli::Run, Vec<(String, String, String)>) {
    let fake = short_spot(3);
    let tmp = tempfile::tempdir().unwrap();
    let spec = pool_spec(&fake.url, "us-east-1", &["us-east-1a", "us-east-1b"], 5, 0, 100, "")
        .replace("fallback       = \"on_demand\"", &format!("fallback       = \"{fallback}\""));
    std::fs::write(tmp.path().join("main.hcl"), spec).unwrap();
    let r = run(tmp.path(), &["apply", "--auto-approve"]);
    let text = std::fs::read_to_string(tmp.path().join("state/default.json")).unwrap();
    let state: serde_json::Value = crate::state_plain::plain(serde_json::from_str(&text).unwrap());
    let nodes = state["resources"]["gpu_pool.train"]["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|n| {
                    let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
                    (s("id"), s("capacity"), s("zone"))
                })
                .collect()
        })
        .unwrap_or_default();
    (fake, r, nodes)
}

fn distinct(nodes: &[(String, String, String)]) -> usize {
    nodes.iter().map(|n| &n.0).collect::<std::collections::BTreeSet<_>>().len()
}

#[test]
fn partial_spot_shortfall_keeps_what_launched_and_falls_back_to_on_demand_for_the_rest() {
    let (fake, r, nodes) = apply_short_spot("on_demand");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let fleets: Vec<(bool, usize)> = fake.actions("CreateFleet").iter().map(|f| (spot(f), count(f))).collect();
    assert_eq!(fleets, [(true, 5), (false, 2)], "only the 2 missing nodes go on-demand");
    assert_eq!(nodes.len(), 5, "{nodes:?}");
    assert_eq!(distinct(&nodes), 5, "no node recorded twice: {nodes:?}");
    let spot_nodes: Vec<_> = nodes.iter().filter(|n| n.1 == "spot").collect();
    assert_eq!(spot_nodes.len(), 3, "{nodes:?}");
    assert!(spot_nodes.iter().all(|n| n.2 == "us-east-1b"), "each node in the zone EC2 chose: {nodes:?}");
    assert!(nodes.iter().filter(|n| n.1 == "on-demand").all(|n| n.2 == "us-east-1a"), "{nodes:?}");
    assert!(
        r.stderr.contains("had no spot capacity; 2 on-demand nodes placed in us-east-1a, us-east-1b"),
        "{}",
        r.stderr
    );
}

#[test]
fn partial_spot_shortfall_with_wait_keeps_what_launched_and_reports_the_rest() {
    let (fake, r, nodes) = apply_short_spot("wait");
    assert_eq!(r.code, 1, "a shortfall under `wait` is short of the plan:\n{}\n{}", r.stdout, r.stderr);
    assert_eq!(fake.actions("CreateFleet").len(), 1, "no on-demand fallback");
    let out = format!("{}{}", r.stdout, r.stderr);
    assert!(out.contains("2 spot nodes in us-east-1a, us-east-1b could not be placed"), "{out}");
    assert!(out.contains("will retry on the next apply"), "{out}");
    assert!(out.contains("Apply incomplete: 2 nodes fewer than planned"), "{out}");
    assert_eq!(nodes.len(), 3, "the 3 launched nodes are recorded: {nodes:?}");
    assert_eq!(distinct(&nodes), 3);
    assert!(nodes.iter().all(|n| n.1 == "spot"), "{nodes:?}");
}

#[test]
fn partial_spot_shortfall_with_fail_fails_but_records_what_launched() {
    let (fake, r, nodes) = apply_short_spot("fail");
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(fake.actions("CreateFleet").len(), 1, "no on-demand fallback");
    assert!(
        r.stderr.contains("2 spot nodes in us-east-1a, us-east-1b could not be placed"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert_eq!(nodes.len(), 3, "launched nodes are never orphaned: {nodes:?}");
    assert_eq!(distinct(&nodes), 3);
}

/// `plan --json` for a spot pool while the fake answers DescribeSpotPriceHistory with
/// `price`, dated now: the spot price the plan's cost uses, and the run's stderr.
fn plan_with_spot_price(price: &str) -> (serde_json::Value, String) {
    let price = price.to_string();
    let fake = FakeEc2::start(move |req, _| {
        if let Some(r) = baseline(req) {
            return r;
        }
        match req.action.as_str() {
            "DescribeSpotPriceHistory" => {
                let now = humantime::format_rfc3339_millis(std::time::SystemTime::now());
                fake_ec2::ok(
                    "DescribeSpotPriceHistory",
                    &format!(
                        "<spotPriceHistorySet><item><availabilityZone>us-east-1a</availabilityZone>\
                         <instanceType>g5.xlarge</instanceType><productDescription>Linux/UNIX</productDescription>\
                         <spotPrice>{price}</spotPrice><timestamp>{now}</timestamp></item></spotPriceHistorySet>"
                    ),
                )
            }
            other => error(400, "InvalidAction", &format!("the fake does not know {other}")),
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), pool_spec(&fake.url, "us-east-1", &["us-east-1a"], 2, 0, 100, ""))
        .unwrap();
    let r = run(tmp.path(), &["plan", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let pool = plan["cost"]["pools"].as_array().unwrap().iter().find(|p| p["address"] == "gpu_pool.train").cloned();
    (pool.expect("the pool's cost")["spot_price"].clone(), r.stderr)
}

#[test]
fn a_fresh_spot_price_from_the_api_prices_the_plan_and_an_absurd_one_is_refused() {
    let (spot, _) = plan_with_spot_price("0.450000");
    assert_eq!(spot["source"], "live", "{spot}");
    assert_eq!(spot["usd_per_hour"], 0.45, "{spot}");

    let (spot, stderr) = plan_with_spot_price("0.000010");
    assert_eq!(spot["source"], "catalog-spot-model", "an absurd answer keeps the catalog's estimate: {spot}");
    assert!(stderr.contains("ignoring the live spot price 0.00001 USD/h of g5.xlarge"), "{stderr}");
}

/// A new pool's type check is asked while refresh lists the fleet; when EC2 says the
/// type has other GPUs than the catalog, the apply fails before making anything: no
/// launch template, no fleet, and the type was checked once.
#[test]
fn a_type_refused_by_the_check_read_ahead_leaves_nothing_behind() {
    let fake = FakeEc2::start(move |req, _| match req.action.as_str() {
        "DescribeInstanceTypes" => fake_ec2::ok(
            "DescribeInstanceTypes",
            "<instanceTypeSet><item><instanceType>g5.xlarge</instanceType><gpuInfo><gpus><item><name>T4</name>\
             <manufacturer>NVIDIA</manufacturer><count>1</count><memoryInfo><sizeInMiB>15360</sizeInMiB></memoryInfo>\
             </item></gpus></gpuInfo></item></instanceTypeSet>",
        ),
        _ => baseline(req).unwrap_or_else(|| error(400, "InvalidAction", &req.action)),
    });
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), pool_spec(&fake.url, "us-east-1", &["us-east-1a"], 2, 0, 50, ""))
        .unwrap();
    let r = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_ne!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("InstanceTypeMismatch"), "{}", r.stderr);
    let made: Vec<String> = fake.requests().into_iter().map(|q| q.action).filter(|a| a.starts_with("Create")).collect();
    assert!(made.is_empty(), "nothing is made for a refused type: {made:?}");
    assert_eq!(fake.actions("DescribeInstanceTypes").len(), 1, "checked once, ahead");
}

/// A look-up read ahead that fails is only a lost head start: the create asks again
/// when it needs the answer, and the apply goes on.
#[test]
fn a_failed_read_ahead_is_asked_again_by_the_create() {
    let seq = AtomicU32::new(1);
    let fake = FakeEc2::start(move |req, before| {
        let asked = |a: &str| before.iter().any(|q| q.action == a);
        match req.action.as_str() {
            "DescribeInstanceTypes" | "DescribeLaunchTemplates" if !asked(&req.action) => {
                error(400, "InvalidParameterValue", "the fake refuses the first one")
            }
            "CreateFleet" => fleet(&ids("0a", count(req), &seq), if spot(req) { "spot" } else { "on-demand" }, &[]),
            _ => baseline(req).unwrap_or_else(|| error(400, "InvalidAction", &req.action)),
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), pool_spec(&fake.url, "us-east-1", &["us-east-1a"], 2, 2, 0, ""))
        .unwrap();
    let r = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(fake.actions("DescribeInstanceTypes").len(), 2, "asked ahead, then again by the create");
    assert_eq!(fake.actions("DescribeLaunchTemplates").len(), 2, "asked ahead, then again by the create");
    assert_eq!(fake.actions("CreateFleet").len(), 1);
}

/// An endpoint of plain `http://` needs no root certificates, so an apply reads none (they
/// cost 5–15 ms before the first call). `SSL_CERT_FILE` names where the roots would come
/// from; here it is a FIFO, so that opening it is seen: a thread waits to open its writing
/// end, which returns only once something opens it to read.
#[cfg(target_os = "linux")]
#[test]
fn an_apply_against_a_plain_http_endpoint_reads_no_root_certificates() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    let seq = AtomicU32::new(1);
    let fake = FakeEc2::start(move |req, _| {
        if let Some(r) = baseline(req) {
            return r;
        }
        match req.action.as_str() {
            "CreateFleet" => fleet(&ids("0e", count(req), &seq), "on-demand", &[]),
            other => error(400, "InvalidAction", &format!("the fake does not know {other}")),
        }
    });
    assert!(fake.url.starts_with("http://"), "{}", fake.url);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), pool_spec(&fake.url, "us-east-1", &["us-east-1a"], 2, 0, 0, ""))
        .unwrap();
    let fifo = tmp.path().join("roots.pem");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let (opened, finished) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let writer = {
        let (fifo, opened, finished) = (fifo.clone(), opened.clone(), finished.clone());
        // Closed right away: a reader sees an empty file, never a hang.
        std::thread::spawn(move || {
            let end = std::fs::OpenOptions::new().write(true).open(&fifo);
            if !finished.load(Ordering::SeqCst) {
                opened.store(true, Ordering::SeqCst);
            }
            drop(end);
        })
    };
    let fifo_text = fifo.to_string_lossy().into_owned();
    let r = cli::run_env(
        tmp.path(),
        &["apply", "--auto-approve"],
        Some((cli::ACCESS_KEY, cli::SECRET_KEY)),
        &[("SSL_CERT_FILE", &fifo_text), ("SSL_CERT_DIR", &fifo_text)],
    );
    finished.store(true, Ordering::SeqCst);
    // Release the writer if nothing read: a non-blocking open of the reading end.
    let _reader =
        rustix::fs::open(&fifo, rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK, rustix::fs::Mode::empty())
            .expect("open the FIFO to read");
    writer.join().expect("the writer thread ends");
    assert!(!opened.load(Ordering::SeqCst), "the apply read root certificates:\n{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(fake.actions("CreateFleet").len(), 1);
}
