//! `gpuplan sim interrupt` and `gpuplan sim capacity` against the workspace's embedded cloud.

use std::path::{Path, PathBuf};

use assert_cmd::cargo::cargo_bin_cmd;
use gpuplan::providers::sim::{DEFAULT_ZONE_CAPACITY, SimCloud, SimConfig, SimProvider};
use gpuplan::providers::{Capacity, CreateNodes, NodePort, NodeState, TAG_ADDRESS, TAG_MANAGED};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env_remove("GPUPLAN_WORKSPACE")
        .env_remove("GPUPLAN_SIM_ZONE_CAPACITY")
        .args(args)
        .output()
        .expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn sim_path(dir: &Path) -> PathBuf {
    dir.join("state").join("default.sim.json")
}

fn create(pool: &str, capacity: Capacity, count: u32, token: &str) -> CreateNodes {
    CreateNodes {
        pool: format!("gpu_pool.{pool}").parse().unwrap(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        zones: vec![],
        instance_types: vec!["p4de.24xlarge".into()],
        capacity,
        count,
        image: None,
        max_spot_price: None,
        token: token.into(),
        tags: [(TAG_MANAGED, "true".to_string()), (TAG_ADDRESS, format!("gpu_pool.{pool}"))].into_iter().collect(),
        user_data: None,
        join: None,
        hardware: None,
        reservation: None,
    }
}

#[test]
fn interrupt_on_an_empty_cloud_exits_1_with_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run(tmp.path(), &["sim", "interrupt", "train"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("error: no live spot node of `gpu_pool.train`"), "{}", r.stderr);
    assert!(r.stderr.contains("hint:") && r.stderr.contains("spot_percent"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(!sim_path(tmp.path()).exists(), "an interrupt must not create a cloud");
}

#[tokio::test]
async fn interrupt_prints_the_reclaimed_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let (spot, on_demand) = {
        let p = SimProvider::new(SimCloud::open(&sim_path(tmp.path()), SimConfig::default()).unwrap());
        let spot = p.create_nodes(&create("train", Capacity::Spot, 3, "s")).await.unwrap().nodes;
        let od = p.create_nodes(&create("train", Capacity::OnDemand, 1, "o")).await.unwrap().nodes;
        (spot, od)
    };
    let r = run(tmp.path(), &["sim", "interrupt", "gpu_pool.train", "--count", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let printed: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(printed.len(), 2, "{}", r.stdout);
    assert!(r.stderr.contains("reclaimed 2 spot nodes of gpu_pool.train"), "{}", r.stderr);
    let cloud = SimCloud::open(&sim_path(tmp.path()), SimConfig::default()).unwrap();
    for n in cloud.nodes() {
        let reclaimed = printed.contains(&n.id.as_str());
        assert_eq!(n.state == NodeState::Reclaimed, reclaimed, "{n:?}");
        assert!(!reclaimed || spot.iter().any(|s| s.id == n.id));
    }
    assert!(on_demand.iter().all(|o| !printed.contains(&o.id.as_str())));
    // Bad pool names are refused before anything is opened.
    drop(cloud);
    let r = run(tmp.path(), &["sim", "interrupt", "job.train"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("not a gpu_pool"), "{}", r.stderr);
}

#[test]
fn capacity_set_then_reset_is_what_the_cloud_enforces() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run(tmp.path(), &["sim", "capacity", "us-east-1a", "--spot", "--limit", "3"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "us-east-1a spot: 3 live nodes per instance type (set)\n");
    {
        let cloud = SimCloud::open(&sim_path(tmp.path()), SimConfig::default()).unwrap();
        assert_eq!(cloud.capacity("us-east-1a", Capacity::Spot), 3);
        assert_eq!(cloud.capacity("us-east-1a", Capacity::OnDemand), DEFAULT_ZONE_CAPACITY);
    }
    let r = run(tmp.path(), &["sim", "capacity", "us-east-1a", "--spot", "--reset"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let cloud = SimCloud::open(&sim_path(tmp.path()), SimConfig::default()).unwrap();
    assert_eq!(cloud.capacity("us-east-1a", Capacity::Spot), DEFAULT_ZONE_CAPACITY);
}

#[test]
fn capacity_rejects_unknown_zones_and_incomplete_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run(tmp.path(), &["sim", "capacity", "mars-1a", "--on-demand", "--limit", "1"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("unknown zone `mars-1a`"), "{}", r.stderr);
    for args in [
        &["sim", "capacity", "us-east-1a", "--limit", "1"][..],
        &["sim", "capacity", "us-east-1a", "--spot"],
        &["sim", "capacity", "us-east-1a", "--spot", "--on-demand", "--limit", "1"],
        &["sim", "capacity", "us-east-1a", "--spot", "--limit", "1", "--reset"],
    ] {
        assert_eq!(run(tmp.path(), args).code, 1, "{args:?}");
    }
}
