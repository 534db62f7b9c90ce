//! Failure injection, latency, configuration, offers and jobs.

use std::time::Duration;

use super::*;
use crate::providers::{ErrorClass, JobPort, JobState, LaunchJob, ListFilter, NodePort, PricePort};

fn flaky(seed: u64) -> SimConfig {
    SimConfig { seed, failure_rate: 0.5, ..SimConfig::default() }
}

/// Which of 40 list calls fail.
async fn failure_pattern(seed: u64) -> Vec<bool> {
    let (_dir, cloud, p) = fresh(flaky(seed));
    let f = ListFilter { region: "us-east-1".into(), lineage: None };
    let mut out = Vec::new();
    for _ in 0..40 {
        match p.list_nodes(&f).await {
            Ok(_) => out.push(false),
            Err(e) => {
                assert_eq!((e.class, e.code.as_str()), (ErrorClass::Retryable, "SimInternalError"));
                out.push(true);
            }
        }
    }
    assert_eq!(cloud.stats().injected_failures, out.iter().filter(|f| **f).count() as u64);
    out
}

#[tokio::test]
async fn failure_injection_is_deterministic_for_a_seed() {
    let a = failure_pattern(3).await;
    assert_eq!(a, failure_pattern(3).await);
    assert_ne!(a, failure_pattern(4).await);
    let failures = a.iter().filter(|f| **f).count();
    assert!((8..=32).contains(&failures), "{failures} of 40 at rate 0.5");
}

#[tokio::test]
async fn an_injected_failure_changes_nothing() {
    let (_dir, cloud, p) = fresh(SimConfig { failure_rate: 1.0, ..SimConfig::default() });
    assert!(p.create_nodes(&req("train", Capacity::Spot, 2, "t")).await.is_err());
    assert!(cloud.nodes().is_empty());
    assert_eq!(cloud.stats().records, 0);
}

#[tokio::test]
async fn every_call_sleeps_the_latency() {
    let (_dir, _cloud, p) = fresh(SimConfig { latency: Some(Duration::from_millis(50)), ..SimConfig::default() });
    let start = std::time::Instant::now();
    p.create_nodes(&req("train", Capacity::Spot, 1, "t")).await.unwrap();
    p.offers("H100", None).await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(100), "{:?}", start.elapsed());
}

#[test]
fn env_overlays_the_config_and_rejects_bad_values() {
    let env = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let c = SimConfig::default()
        .with_env(&env(&[
            ("GPUPLAN_SIM_LATENCY", "50ms"),
            ("GPUPLAN_SIM_FAILURE_RATE", "0.1"),
            ("GPUPLAN_SIM_ZONE_CAPACITY", "4"),
            ("GPUPLAN_SIM_SEED", "9"),
            ("GPUPLAN_SIM_JOB_DURATION", "2m"),
        ]))
        .unwrap();
    assert_eq!(c.latency, Some(Duration::from_millis(50)));
    assert_eq!((c.failure_rate, c.zone_capacity, c.seed), (0.1, Some(4), 9));
    assert_eq!(c.job_duration, Duration::from_secs(120));
    let e = SimConfig::default().with_env(&env(&[("GPUPLAN_SIM_FAILURE_RATE", "1.5")])).unwrap_err();
    assert!(e.contains("GPUPLAN_SIM_FAILURE_RATE=`1.5`"), "{e}");
    assert!(SimConfig::default().with_env(&env(&[("GPUPLAN_SIM_LATENCY", "soon")])).is_err());
}

#[tokio::test]
async fn offers_span_all_three_clouds_with_spot_discounts() {
    let (_dir, _cloud, p) = fresh(SimConfig::default());
    let offers = p.offers("A100-80GB", None).await.unwrap();
    let clouds: std::collections::BTreeSet<_> = offers.iter().map(|o| o.provider).collect();
    assert!(clouds.len() >= 2, "{clouds:?}");
    assert!(offers.iter().all(|o| o.gpu == "A100-80GB" && !o.live_price));
    let od = offers.iter().find(|o| o.instance_type == "p4de.24xlarge" && o.capacity == Capacity::OnDemand).unwrap();
    let spot = offers
        .iter()
        .find(|o| o.instance_type == "p4de.24xlarge" && o.region == od.region && o.capacity == Capacity::Spot)
        .unwrap();
    assert!(spot.price_usd < od.price_usd);
    let east = p.offers("A100-80GB", Some("us-east-1")).await.unwrap();
    assert!(!east.is_empty() && east.iter().all(|o| o.region == "us-east-1"));
    assert_eq!(p.offers("Z9000", None).await.unwrap_err().class, ErrorClass::Invalid);
}

fn launch(node: &str, token: &str) -> LaunchJob {
    LaunchJob {
        job: "job.finetune".parse().unwrap(),
        pool: pool("train"),
        node_id: node.into(),
        region: String::new(),
        image: "trainer:1".into(),
        command: vec!["python".into(), "train.py".into()],
        env: Default::default(),
        secrets: Default::default(),
        gpus: 8,
        attempt: 1,
        token: token.into(),
        shape: None,
        max_runtime_secs: None,
        keep_node: false,
        kube: None,
        readiness: Default::default(),
    }
}

#[tokio::test]
async fn jobs_run_finish_cancel_and_are_preempted_with_their_node() {
    let config = SimConfig { job_duration: Duration::from_millis(150), ..SimConfig::default() };
    let (_dir, cloud, p) = fresh(config);
    let mut ids: Vec<String> =
        p.create_nodes(&req("train", Capacity::Spot, 3, "n")).await.unwrap().nodes.into_iter().map(|n| n.id).collect();
    ids.sort();
    // `interrupt` takes the highest id first, so the job on ids[2] is the one preempted.
    let finishes = p.launch_job(&launch(&ids[0], "j1")).await.unwrap();
    assert_eq!(finishes.state, JobState::Running);
    assert_eq!(p.launch_job(&launch(&ids[0], "j1")).await.unwrap().id, finishes.id, "token is idempotent");
    let cancelled = p.launch_job(&launch(&ids[1], "j2")).await.unwrap();
    let preempted = p.launch_job(&launch(&ids[2], "j3")).await.unwrap();
    assert_eq!(p.cancel_job("us-east-1", &cancelled.id).await.unwrap().state, JobState::Cancelled);
    assert_eq!(cloud.interrupt(&pool("train"), 1).unwrap(), [ids[2].clone()]);
    assert_eq!(p.job_status("us-east-1", &preempted.id).await.unwrap().state, JobState::Preempted);
    assert_eq!(p.job_status("us-east-1", &finishes.id).await.unwrap().state, JobState::Running);
    // No new job on a reclaimed node.
    assert_eq!(p.launch_job(&launch(&ids[2], "j4")).await.unwrap_err().code, "SimNodeNotRunning");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(p.job_status("us-east-1", &finishes.id).await.unwrap().state, JobState::Succeeded);
    assert_eq!(p.job_status("us-east-1", &cancelled.id).await.unwrap().state, JobState::Cancelled);
    assert_eq!(p.job_status("us-east-1", &preempted.id).await.unwrap().state, JobState::Preempted);
    assert_eq!(p.job_status("eu-west-1", &finishes.id).await.unwrap_err().code, "SimJobNotFound");
}
