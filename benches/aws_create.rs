//! Creating a 500-node AWS pool against moto's EC2 server: how many API calls
//! `gpuplan apply` makes and how long it takes, against two bare `CreateFleet` calls of
//! 250 instances each, the least any client needs (targets: at most 8 calls, at most
//! 1.1× the bare calls). Then the no-op `gpuplan plan` of that pool, against one
//! `DescribeInstances` filtered by the state's lineage tag that lists the 500, the least
//! a refresh needs (target: at most 1.15×).
//!
//! ```sh
//! cargo bench --bench aws_create                          # starts moto from .venv/
//! GPUPLAN_BENCH_MOTO_ENDPOINT=http://127.0.0.1:5000 cargo bench --bench aws_create
//! GPUPLAN_BENCH_ROUNDS=1 GPUPLAN_BENCH_NOOP_RUNS=3 cargo bench --bench aws_create
//! GPUPLAN_BENCH_BIN=/tmp/gpuplan-old cargo bench --bench aws_create   # another build of gpuplan
//! ```
//!
//! The pool: 500 nodes of `g5.xlarge` or `g5.2xlarge` over two zones, half on spot. Both
//! sides talk to moto through the same counting proxy (`tests/testsuite/aws/fake_ec2.rs`), which
//! logs every request as it crosses the wire. Each round uses fresh regions (moto slows
//! down with the instances a region holds) that are touched once before timing, since
//! moto builds a region's default VPC on first use and EC2 has no such cost. The bare
//! calls use a launch template made beforehand and the same overrides and tags as
//! gpuplan's requests. The median round is printed. The no-op plan and its floor run
//! `GPUPLAN_BENCH_NOOP_RUNS` times each (default 7), interleaved so both see the same
//! load; each round's ratio is of the two medians. `GPUPLAN_BENCH_VERBOSE=1` prints when
//! each call of every gpuplan run was made and answered.

#[path = "../tests/testsuite/aws/cli.rs"]
mod cli;
#[path = "../tests/testsuite/aws/fake_ec2.rs"]
mod fake_ec2;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, Filter, FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest,
    FleetLaunchTemplateSpecificationRequest, FleetType, InstanceType, RequestLaunchTemplateData, ResourceType, Tag,
    TagSpecification, TargetCapacitySpecificationRequest,
};
use fake_ec2::FakeEc2;
use gpuplan::providers::aws::AwsSettings;

struct Moto(Option<Child>);

impl Drop for Moto {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn start_moto() -> (String, Moto) {
    if let Ok(e) = std::env::var("GPUPLAN_BENCH_MOTO_ENDPOINT") {
        return (e, Moto(None));
    }
    let script = root().join("scripts/moto");
    let ok = Command::new(&script).arg("install").status().map(|s| s.success()).unwrap_or(false);
    assert!(ok, "scripts/moto install failed");
    let port = String::from_utf8(Command::new(&script).arg("free-port").output().expect("free port").stdout)
        .expect("port")
        .trim()
        .to_string();
    let child = Command::new(root().join(".venv/bin/moto_server"))
        .args(["-H", "127.0.0.1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto_server");
    let url = format!("http://127.0.0.1:{port}");
    let ok = Command::new(&script).args(["wait", &url]).status().map(|s| s.success()).unwrap_or(false);
    assert!(ok, "moto did not start");
    (url, Moto(Some(child)))
}

const NODES: u32 = 500;
const TYPES: [&str; 2] = ["g5.xlarge", "g5.2xlarge"];

async fn client(endpoint: &str, region: &str) -> Client {
    let sdk = AwsSettings {
        name: "aws".into(),
        endpoint: Some(endpoint.into()),
        access_key: Some("bench".into()),
        secret_key: Some("bench".into()),
        ..Default::default()
    }
    .load()
    .await;
    AwsSettings::client(&sdk, region)
}

/// Live instances in a region, every page.
async fn live(c: &Client) -> usize {
    let mut n = 0;
    let mut token: Option<String> = None;
    loop {
        let out = c
            .describe_instances()
            .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
            .set_next_token(token.take())
            .send()
            .await
            .expect("DescribeInstances");
        n += out.reservations().iter().map(|r| r.instances().len()).sum::<usize>();
        match out.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return n,
        }
    }
}

/// The default subnets of two zones.
async fn subnets(c: &Client, zones: &[String]) -> Vec<String> {
    let out = c
        .describe_subnets()
        .filters(Filter::builder().name("default-for-az").values("true").build())
        .send()
        .await
        .expect("DescribeSubnets");
    zones
        .iter()
        .map(|z| {
            out.subnets()
                .iter()
                .find(|s| s.availability_zone() == Some(z))
                .and_then(|s| s.subnet_id())
                .expect("a default subnet")
                .to_string()
        })
        .collect()
}

/// gpuplan's apply of the pool in `region`, in `tmp`: (wall time, calls by action).
fn gpuplan_create(
    proxy: &FakeEc2,
    tmp: &tempfile::TempDir,
    region: &str,
    zones: &[String],
) -> (Duration, BTreeMap<String, usize>) {
    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
    let spec = cli::pool_spec(&proxy.url, region, &zones, NODES, 0, 50, "")
        .replace("max     = 20", &format!("max     = {NODES}"))
        .replace("instance_types = [\"g5.xlarge\"]", "instance_types = [\"g5.xlarge\", \"g5.2xlarge\"]");
    std::fs::write(tmp.path().join("main.hcl"), spec).expect("write spec");
    let before = proxy.requests().len();
    let t = Instant::now();
    let r = gpuplan(tmp.path(), &["apply", "--auto-approve"]);
    let took = t.elapsed();
    assert!(r.status.success(), "apply:\n{}", String::from_utf8_lossy(&r.stderr));
    timeline("apply", proxy, before, t, took);
    (took, calls_since(proxy, before))
}

/// With `GPUPLAN_BENCH_VERBOSE=1`: when each call of a run was made and answered, from
/// the process start (where the time beyond the calls goes).
fn timeline(what: &str, proxy: &FakeEc2, before: usize, start: Instant, took: Duration) {
    if std::env::var("GPUPLAN_BENCH_VERBOSE").as_deref() != Ok("1") {
        return;
    }
    let ms = |i: Instant| i.saturating_duration_since(start).as_secs_f64() * 1000.0;
    let calls: Vec<String> = proxy.requests()[before..]
        .iter()
        .map(|q| format!("{} {:.0}–{:.0} ms", q.action, ms(q.at), q.answered.map_or(f64::NAN, ms)))
        .collect();
    println!("  {what}: {}; exit {:.0} ms", calls.join(", "), took.as_secs_f64() * 1000.0);
}

/// The calls the proxy saw after the first `before`, by action.
fn calls_since(proxy: &FakeEc2, before: usize) -> BTreeMap<String, usize> {
    let mut calls = BTreeMap::new();
    for req in &proxy.requests()[before..] {
        *calls.entry(req.action.clone()).or_default() += 1;
    }
    calls
}

/// `gpuplan plan --detailed-exitcode` of the converged pool in `dir` (exit 0: no-op):
/// (wall time, calls by action).
fn gpuplan_noop(proxy: &FakeEc2, dir: &std::path::Path) -> (Duration, BTreeMap<String, usize>) {
    let before = proxy.requests().len();
    let t = Instant::now();
    let r = gpuplan(dir, &["plan", "--detailed-exitcode"]);
    let took = t.elapsed();
    assert_eq!(r.status.code(), Some(0), "a no-op plan:\n{}", String::from_utf8_lossy(&r.stdout));
    timeline("no-op plan", proxy, before, t, took);
    (took, calls_since(proxy, before))
}

/// The emulator's floor for a no-op plan: one DescribeInstances filtered by the state's
/// lineage tag (the one tag only gpuplan writes), every page, on a client already
/// connected: (wall time, instances).
async fn floor_describe(c: &Client, lineage: &str) -> (Duration, usize) {
    let t = Instant::now();
    let mut n = 0;
    let mut token: Option<String> = None;
    loop {
        let out = c
            .describe_instances()
            .filters(Filter::builder().name("tag:gpuplan:lineage").values(lineage).build())
            .max_results(1000)
            .set_next_token(token.take())
            .send()
            .await
            .expect("DescribeInstances");
        n += out.reservations().iter().map(|r| r.instances().len()).sum::<usize>();
        match out.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return (t.elapsed(), n),
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `gpuplan ARGS` in `dir`, the way `tests/testsuite/aws/cli.rs` runs it, with the
/// binary of this build or `GPUPLAN_BENCH_BIN` (to measure an older build).
fn gpuplan(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let bin = std::env::var("GPUPLAN_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_gpuplan").to_string());
    Command::new(bin)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("GPUPLAN_WORKSPACE")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_ENDPOINT_URL_EC2")
        .env_remove("AWS_SESSION_TOKEN")
        .env("AWS_ACCESS_KEY_ID", cli::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", cli::SECRET_KEY)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", dir.join("no-aws-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-aws-credentials"))
        .args(args)
        .output()
        .expect("gpuplan runs")
}

/// Two CreateFleet calls of 250, spot then on-demand, as bare as the pool allows.
async fn bare_create(c: &Client, region: &str, zones: &[String]) -> Duration {
    let lt = c
        .create_launch_template()
        .launch_template_name(format!("bench-{region}"))
        .launch_template_data(RequestLaunchTemplateData::builder().image_id("ami-0123456789abcdef0").build())
        .send()
        .await
        .expect("CreateLaunchTemplate");
    let lt_id = lt.launch_template().and_then(|l| l.launch_template_id()).expect("template id").to_string();
    let subnets = subnets(c, zones).await;
    // The tags gpuplan puts on every node of the pool: its own four and the pool's label.
    let tags: Vec<Tag> = [
        ("gpuplan:managed", "true"),
        ("gpuplan:lineage", "00000000-0000-4000-8000-000000000000"),
        ("gpuplan:address", "gpu_pool.train"),
        ("gpuplan:provider", "aws"),
        ("team", "ml"),
    ]
    .iter()
    .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
    .collect();
    let t = Instant::now();
    for cap in [DefaultTargetCapacityType::Spot, DefaultTargetCapacityType::OnDemand] {
        let overrides = TYPES
            .iter()
            .flat_map(|t| {
                subnets.iter().map(move |s| {
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(InstanceType::from(*t))
                        .subnet_id(s)
                        .build()
                })
            })
            .collect();
        let n = (NODES / 2) as i32;
        let out = c
            .create_fleet()
            .r#type(FleetType::Instant)
            .launch_template_configs(
                FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(
                        FleetLaunchTemplateSpecificationRequest::builder()
                            .launch_template_id(&lt_id)
                            .version("1")
                            .build(),
                    )
                    .set_overrides(Some(overrides))
                    .build(),
            )
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(n)
                    .default_target_capacity_type(cap)
                    .build(),
            )
            .tag_specifications(
                TagSpecification::builder().resource_type(ResourceType::Instance).set_tags(Some(tags.clone())).build(),
            )
            .tag_specifications(
                TagSpecification::builder().resource_type(ResourceType::Volume).set_tags(Some(tags.clone())).build(),
            )
            .send()
            .await
            .expect("CreateFleet");
        let got: usize = out.instances().iter().map(|i| i.instance_ids().len()).sum();
        assert_eq!(got, n as usize, "moto launched the whole fleet");
    }
    t.elapsed()
}

fn main() {
    let rounds: usize = std::env::var("GPUPLAN_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    // gpuplan's pools need a region its catalog lists with g5 types; the bare calls do not.
    let ours = ["us-east-2", "eu-west-1", "us-west-2", "eu-central-1", "us-east-1"];
    let bare = ["ca-central-1", "sa-east-1", "eu-north-1", "ap-south-1", "eu-west-2"];
    assert!(rounds <= ours.len(), "at most {} rounds", ours.len());
    let (endpoint, _moto) = start_moto();
    let proxy = FakeEc2::proxy(&endpoint);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let mut results = Vec::new();
    let noop_runs: usize = std::env::var("GPUPLAN_BENCH_NOOP_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(7);
    let mut noops = Vec::new();
    let (mut all_plans, mut all_floors) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (ours, bare) = (ours[round], bare[round]);
        let zones = |r: &str| vec![format!("{r}a"), format!("{r}b")];
        let (oc, bc) = rt.block_on(async { (client(&proxy.url, ours).await, client(&proxy.url, bare).await) });
        // Warm both regions (moto builds the default VPC on first use).
        rt.block_on(async { (live(&oc).await, live(&bc).await) });
        let bare_time = rt.block_on(bare_create(&bc, bare, &zones(bare)));
        let tmp = tempfile::tempdir().expect("tempdir");
        let (ours_time, calls) = gpuplan_create(&proxy, &tmp, ours, &zones(ours));
        let made = rt.block_on(live(&oc));
        assert_eq!(made, NODES as usize, "gpuplan created the pool");
        let total: usize = calls.values().sum();
        println!(
            "round {round}: gpuplan {ours_time:.2?} ({total} calls: {calls:?}), bare {bare_time:.2?}, ratio {:.2}",
            ours_time.as_secs_f64() / bare_time.as_secs_f64()
        );
        results.push((ours_time.as_secs_f64() / bare_time.as_secs_f64(), ours_time, bare_time, total, calls));
        // The no-op plan of the pool just made, interleaved with its floor so that both
        // see the same load.
        let lineage = cli::lineage(tmp.path());
        let (mut plans, mut floors) = (Vec::new(), Vec::new());
        let mut noop_calls = BTreeMap::new();
        for _ in 0..noop_runs {
            let (d, seen) = rt.block_on(floor_describe(&oc, &lineage));
            assert_eq!(seen, NODES as usize, "the floor lists the pool");
            floors.push(d);
            let (d, calls) = gpuplan_noop(&proxy, tmp.path());
            plans.push(d);
            noop_calls = calls;
        }
        let (plan, floor) = (median(plans.clone()), median(floors.clone()));
        let ratio = plan.as_secs_f64() / floor.as_secs_f64();
        println!(
            "round {round}: no-op plan {plan:.2?} ({noop_calls:?}), floor {floor:.2?}, ratio {ratio:.2} (plans {plans:.2?}, floors {floors:.2?})"
        );
        all_plans.extend(plans);
        all_floors.extend(floors);
        noops.push((ratio, plan, floor, noop_calls));
    }
    results.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (ratio, ours, bare, total, calls) = &results[results.len() / 2];
    println!("| create a {NODES}-node pool (2 zones × 2 types, 50 % spot) | API calls | {total} ({calls:?}) | ≤ 8 |");
    println!(
        "| create a {NODES}-node pool | time, `gpuplan apply` vs two bare CreateFleet of 250 | {ours:.2?} vs {bare:.2?} = {ratio:.2}× (median of {rounds}) | ≤ 1.1× |"
    );
    let (n, plan, floor) = (all_plans.len(), median(all_plans), median(all_floors));
    println!(
        "no-op plan, every run of every round: median {plan:.2?} vs {floor:.2?} = {:.2}× ({n} runs each)",
        plan.as_secs_f64() / floor.as_secs_f64()
    );
    noops.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (ratio, plan, floor, calls) = &noops[noops.len() / 2];
    println!(
        "| no-op plan of the {NODES}-node pool | time, `gpuplan plan` vs one tag-filtered DescribeInstances | {plan:.2?} vs {floor:.2?} = {ratio:.2}× ({calls:?}; median round of {rounds}, each the median of {noop_runs}) | ≤ 1.15× |"
    );
}
