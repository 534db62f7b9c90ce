//! Creating a 500-node AWS pool against moto's EC2 server: how many API calls
//! `gpuplan apply` makes and how long it takes, against two bare `CreateFleet` calls of
//! 250 instances each, the least any client needs (targets: at most 8 calls, at most
//! 1.1× the bare calls). Then the no-op `gpuplan plan` of that pool, against one
//! `DescribeInstances` filtered by the state's lineage tag that lists the 500, the least
//! a refresh needs (target: at most 1.15×).
//!
//! ```sh
//! cargo bench --bench aws_create                          # starts moto from .venv/
//! GPUPLAN_BENCH_ROUNDS=3 GPUPLAN_BENCH_NOOP_RUNS=1 cargo bench --bench aws_create
//! GPUPLAN_BENCH_BIN=/tmp/gpuplan-old cargo bench --bench aws_create   # another build of gpuplan
//! GPUPLAN_BENCH_BASELINE=/tmp/gpuplan-old cargo bench --bench aws_create   # both builds, same rounds
//! GPUPLAN_BENCH_MOTO_ENDPOINT=http://127.0.0.1:5000 GPUPLAN_BENCH_MOTO_RESET=1 cargo bench --bench aws_create
//! ```
//!
//! The pool: 500 nodes of `g5.xlarge` or `g5.2xlarge` over two zones, half on spot. Both
//! sides talk to moto through the same counting proxy (`tests/testsuite/aws/fake_ec2.rs`), which
//! logs every request as it crosses the wire. Noise on a shared machine is larger than
//! the margin measured (single rounds range over 2×), so each side's create runs on an
//! emulator in the same state: moto is reset before each (`/moto-api/reset`, which is why
//! an endpoint given from outside must be one the bench may wipe, said with
//! `GPUPLAN_BENCH_MOTO_RESET=1`), the region is touched once before timing (moto builds
//! a region's default VPC on first use; EC2 has no such cost), and the two run back to
//! back, in alternating order, `GPUPLAN_BENCH_ROUNDS` times (default 9); with
//! `GPUPLAN_BENCH_BASELINE` another build's apply is a third side of every round (the
//! order rotates), for a before/after under the same load. The bare calls
//! use a launch template made beforehand and the same overrides and tags as gpuplan's
//! requests. The summary gives each side's median, the ratio of the two medians and the
//! median of the rounds' ratios, with the load average before and after. After each
//! gpuplan create, its no-op plan and the floor run `GPUPLAN_BENCH_NOOP_RUNS` times each
//! (default 3), interleaved so both see the same load. `GPUPLAN_BENCH_VERBOSE=1` prints
//! when each call of every run was made and answered.

#[path = "../tests/testsuite/aws/cli.rs"]
mod cli;
#[path = "../tests/testsuite/aws/fake_ec2.rs"]
mod fake_ec2;
#[path = "../tests/testsuite/state_plain.rs"]
#[allow(dead_code)]
mod state_plain;

use std::collections::BTreeMap;
use std::io::{Read, Write};
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

/// The moto to measure against: one of the bench's own, or the endpoint given, which the
/// bench resets between runs and so must be allowed to wipe.
fn start_moto() -> (String, Moto) {
    if let Ok(e) = std::env::var("GPUPLAN_BENCH_MOTO_ENDPOINT") {
        assert!(
            std::env::var("GPUPLAN_BENCH_MOTO_RESET").as_deref() == Ok("1"),
            "the bench resets moto before every create (everything in it is lost): set GPUPLAN_BENCH_MOTO_RESET=1 to allow it on {e}"
        );
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

/// Wipe everything moto holds (every region, every account), so each run starts from
/// the same empty emulator.
fn reset_moto(endpoint: &str) {
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(host).expect("connect to moto");
    let req =
        format!("POST /moto-api/reset HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("ask moto to reset");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("moto's answer to the reset");
    assert!(answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"), "moto reset: {answer}");
}

/// The load average over the last minute, as /proc/loadavg says.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
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

/// gpuplan's apply of the pool in `region`, in `tmp`: (wall time, calls by action, the
/// time its CreateFleet calls were in flight, the time before the first was made).
fn gpuplan_create(
    bin: &str,
    proxy: &FakeEc2,
    tmp: &tempfile::TempDir,
    region: &str,
    zones: &[String],
) -> (Duration, BTreeMap<String, usize>, Duration, Duration) {
    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
    let spec = cli::pool_spec(&proxy.url, region, &zones, NODES, 0, 50, "")
        .replace("max     = 20", &format!("max     = {NODES}"))
        .replace("instance_types = [\"g5.xlarge\"]", "instance_types = [\"g5.xlarge\", \"g5.2xlarge\"]");
    std::fs::write(tmp.path().join("main.hcl"), spec).expect("write spec");
    let before = proxy.requests().len();
    let t = Instant::now();
    let r = gpuplan(bin, tmp.path(), &["apply", "--auto-approve"]);
    let took = t.elapsed();
    assert!(r.status.success(), "apply:\n{}", String::from_utf8_lossy(&r.stderr));
    timeline(&format!("apply ({bin})"), proxy, before, t, took);
    let (fleets, first) = fleet_time(proxy, before);
    (took, calls_since(proxy, before), fleets, first.saturating_duration_since(t))
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
    if std::env::var("GPUPLAN_BENCH_DUMP").as_deref() == Ok("1") {
        for q in proxy.requests()[before..].iter().filter(|q| q.action == "CreateFleet") {
            println!("    {:?}", q.params);
        }
    }
}

/// How long the CreateFleet calls after the first `before` took to answer, together,
/// and when the first was made.
fn fleet_time(proxy: &FakeEc2, before: usize) -> (Duration, Instant) {
    let fleets: Vec<_> = proxy.requests()[before..].iter().filter(|q| q.action == "CreateFleet").cloned().collect();
    let first = fleets.iter().map(|q| q.at).min().expect("a CreateFleet");
    (fleets.iter().map(|q| q.answered.expect("answered").saturating_duration_since(q.at)).sum(), first)
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
    let r = gpuplan(&main_bin(), dir, &["plan", "--detailed-exitcode"]);
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

/// The binary measured: this build's, or `GPUPLAN_BENCH_BIN` (an older build).
fn main_bin() -> String {
    std::env::var("GPUPLAN_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_gpuplan").to_string())
}

/// `BIN ARGS` in `dir`, the way `tests/testsuite/aws/cli.rs` runs gpuplan.
fn gpuplan(bin: &str, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
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

/// Two CreateFleet calls of 250, on-demand then spot (gpuplan's order, which changes
/// moto's time for the pair), as bare as the pool allows.
async fn bare_create(c: &Client, proxy: &FakeEc2, region: &str, zones: &[String]) -> Duration {
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
    let before = proxy.requests().len();
    let t = Instant::now();
    for cap in [DefaultTargetCapacityType::OnDemand, DefaultTargetCapacityType::Spot] {
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
    let took = t.elapsed();
    timeline("bare", proxy, before, t, took);
    took
}

/// Median, lowest and highest.
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Both sides' times and the rounds' ratios, as a README row.
fn summary(what: &str, ours: &[Duration], floor: &[Duration]) -> String {
    let ratios: Vec<f64> = ours.iter().zip(floor).map(|(a, b)| a.as_secs_f64() / b.as_secs_f64()).collect();
    let (o, f) = (median(ours.to_vec()), median(floor.to_vec()));
    let (mid, lo, hi) = spread(&ratios);
    format!(
        "{what}: {o:.2?} vs {f:.2?} = {:.2}× (medians of {} runs each; median of the paired ratios {mid:.2}×, range {lo:.2}–{hi:.2}×)",
        o.as_secs_f64() / f.as_secs_f64(),
        ratios.len()
    )
}

/// One side's creates over the rounds.
#[derive(Default)]
struct Side {
    times: Vec<Duration>,
    /// For gpuplan: its time beyond its two CreateFleet calls (what the target's margin
    /// is for), and the part of it before the first CreateFleet.
    beyond: Vec<Duration>,
    before_fleets: Vec<Duration>,
}

fn main() {
    let env = |k: &str, default: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let rounds = env("GPUPLAN_BENCH_ROUNDS", 9);
    let noop_runs = env("GPUPLAN_BENCH_NOOP_RUNS", 3);
    // The sides of a round: gpuplan, the bare calls, and another build if given.
    let mut bins = vec![Some(main_bin()), None];
    bins.extend(std::env::var("GPUPLAN_BENCH_BASELINE").ok().map(Some));
    let names = ["gpuplan", "bare", "baseline"];
    // gpuplan's pools need a region its catalog lists with g5 types. moto is reset
    // before each create, so every side uses the same one.
    let region = "us-east-2";
    let zones = vec![format!("{region}a"), format!("{region}b")];
    let (endpoint, _moto) = start_moto();
    let proxy = FakeEc2::proxy(&endpoint);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let load_before = load();
    let mut sides: Vec<Side> = bins.iter().map(|_| Side::default()).collect();
    let mut calls = BTreeMap::new();
    let (mut all_plans, mut all_floors) = (Vec::new(), Vec::new());
    let mut noop_calls = BTreeMap::new();
    for round in 0..rounds {
        // Which side goes first rotates: moto and the machine drift within a round.
        let order: Vec<usize> = (0..bins.len()).map(|k| (k + round) % bins.len()).collect();
        for &side in &order {
            reset_moto(&endpoint);
            let c = rt.block_on(client(&proxy.url, region));
            // Warm the region (moto builds the default VPC on first use).
            rt.block_on(live(&c));
            let Some(bin) = &bins[side] else {
                let took = rt.block_on(bare_create(&c, &proxy, region, &zones));
                sides[side].times.push(took);
                continue;
            };
            let tmp = tempfile::tempdir().expect("tempdir");
            let (took, made, fleets, first) = gpuplan_create(bin, &proxy, &tmp, region, &zones);
            sides[side].times.push(took);
            sides[side].beyond.push(took.saturating_sub(fleets));
            sides[side].before_fleets.push(first);
            assert_eq!(rt.block_on(live(&c)), NODES as usize, "gpuplan created the pool");
            if side != 0 {
                continue;
            }
            calls = made;
            // The no-op plan of the pool just made, interleaved with its floor so that
            // both see the same load.
            let lineage = cli::lineage(tmp.path());
            for _ in 0..noop_runs {
                let (d, seen) = rt.block_on(floor_describe(&c, &lineage));
                assert_eq!(seen, NODES as usize, "the floor lists the pool");
                all_floors.push(d);
                let (d, calls) = gpuplan_noop(&proxy, tmp.path());
                all_plans.push(d);
                noop_calls = calls;
            }
        }
        let times: Vec<String> = order.iter().map(|&s| format!("{} {:.2?}", names[s], sides[s].times[round])).collect();
        println!(
            "round {round}: {}; ratio {:.2}",
            times.join(", "),
            sides[0].times[round].as_secs_f64() / sides[1].times[round].as_secs_f64()
        );
    }
    let total: usize = calls.values().sum();
    println!("load average before {load_before}, after {}", load());
    println!("| create a {NODES}-node pool (2 zones × 2 types, 50 % spot) | API calls | {total} ({calls:?}) | ≤ 8 |");
    let floor = median(sides[1].times.clone());
    for s in [0, 2].into_iter().filter(|s| *s < sides.len()) {
        let what = format!("create, {} `gpuplan apply` vs two bare CreateFleet of 250", names[s]);
        println!("{}", summary(&what, &sides[s].times, &sides[1].times));
        let (b, first) = (median(sides[s].beyond.clone()), median(sides[s].before_fleets.clone()));
        println!(
            "{}'s time beyond its CreateFleet calls: median {b:.2?} = {:.1} % of the floor's median ({first:.2?} of it before the first)",
            names[s],
            100.0 * b.as_secs_f64() / floor.as_secs_f64()
        );
    }
    if !all_plans.is_empty() {
        println!(
            "{} ({noop_calls:?})",
            summary("no-op plan vs one tag-filtered DescribeInstances", &all_plans, &all_floors)
        );
    }
}
