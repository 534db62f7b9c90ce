//! Refresh of a large AWS fleet against moto's EC2 server: how many API calls and how
//! long `list_nodes` takes for N tagged instances (target: at most 6 calls for 5,000).
//!
//! ```sh
//! cargo bench --bench aws_refresh                          # starts moto from .venv/
//! GPUPLAN_BENCH_AWS_NODES=10000 cargo bench --bench aws_refresh
//! GPUPLAN_BENCH_MOTO_ENDPOINT=http://127.0.0.1:5000 cargo bench --bench aws_refresh
//! ```
//!
//! The instances are launched the way gpuplan launches them (CreateFleet instant, 500
//! per call: moto slows down with the number of instances it holds, and a 1,000-instance
//! call can outlast the provider's 120 s request timeout), then a fresh provider lists them three times; the median time and
//! the calls of one refresh are printed, then everything is terminated (also counted).

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpuplan::providers::aws::{AwsProvider, AwsSettings};
use gpuplan::providers::{Capacity, CreateNodes, ListFilter, NodePort, TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED};

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

fn provider(endpoint: &str) -> AwsProvider {
    AwsProvider::new(AwsSettings {
        name: "aws".into(),
        endpoint: Some(endpoint.into()),
        access_key: Some("bench".into()),
        secret_key: Some("bench".into()),
        image: Some("ami-0123456789abcdef0".into()),
        ..Default::default()
    })
}

fn main() {
    let n: u32 = std::env::var("GPUPLAN_BENCH_AWS_NODES").ok().and_then(|v| v.parse().ok()).unwrap_or(5_000);
    let (endpoint, _moto) = start_moto();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let region = "us-east-1".to_string();
        let lineage = format!("bench-{}", uuid::Uuid::new_v4());
        let p = provider(&endpoint);
        let t0 = Instant::now();
        let mut made = 0u32;
        let mut batch = 0;
        while made < n {
            let count = (n - made).min(500);
            let zone = if batch % 2 == 0 { "us-east-1a" } else { "us-east-1b" };
            let req = CreateNodes {
                pool: "gpu_pool.bench".parse().unwrap(),
                region: region.clone(),
                zone: zone.into(),
                zones: vec![],
                instance_types: vec!["g5.xlarge".into()],
                capacity: if batch % 2 == 0 { Capacity::OnDemand } else { Capacity::Spot },
                count,
                image: None,
                max_spot_price: None,
                token: format!("gp-bench-{}-{batch}", &lineage[6..14]),
                tags: [(TAG_MANAGED, "true"), (TAG_LINEAGE, lineage.as_str()), (TAG_ADDRESS, "gpu_pool.bench")]
                    .into_iter()
                    .collect(),
                user_data: None,
                join: None,
                hardware: None,
                reservation: None,
            };
            let r = p.create_nodes(&req).await.expect("create");
            assert!(r.errors.is_empty(), "{:?}", r.errors);
            made += r.nodes.len() as u32;
            batch += 1;
        }
        println!("setup: launched {made} instances in {:.1?} with {:?}", t0.elapsed(), p.calls());

        let filter = ListFilter { region: region.clone(), lineage: Some(lineage.clone()) };
        let mut times = Vec::new();
        let mut calls = BTreeMap::new();
        let mut found = 0;
        for _ in 0..3 {
            let fresh = provider(&endpoint);
            let t = Instant::now();
            let nodes = fresh.list_nodes(&filter).await.expect("list");
            times.push(t.elapsed());
            found = nodes.len();
            calls = fresh.calls();
        }
        times.sort();
        let median: Duration = times[1];
        let total: u64 = calls.values().sum();
        println!("| refresh (DescribeInstances, 1,000 per page) | {found} instances | {total} API calls, {median:.2?} (median of 3) | ≤ 6 calls |");
        assert_eq!(found as u32, n, "refresh must see every instance");

        let fresh = provider(&endpoint);
        let ids: Vec<String> = fresh.list_nodes(&filter).await.expect("list").into_iter().map(|n| n.id).collect();
        let before = fresh.calls();
        let t = Instant::now();
        fresh.terminate_nodes(&region, &ids).await.expect("terminate");
        let after = fresh.calls();
        let diff: BTreeMap<_, _> =
            after.iter().map(|(k, v)| (*k, v - before.get(k).copied().unwrap_or(0))).filter(|(_, v)| *v > 0).collect();
        println!("| terminate (ownership check + TerminateInstances) | {} instances | {diff:?}, {:.2?} | batches ≤ 1,000 |", ids.len(), t.elapsed());
    });
}
