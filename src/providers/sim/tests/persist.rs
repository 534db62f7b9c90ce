//! Persistence and locking: reopen, tokens, snapshot untouched by calls, torn lines,
//! compaction, corrupt files, the lock.

use std::time::{Duration, Instant};

use super::*;
use crate::providers::sim::SimError;
use crate::providers::sim::store::sibling;
use crate::providers::{ListFilter, NodePort, NodeState};

fn all() -> ListFilter {
    ListFilter { region: "us-east-1".into(), lineage: None }
}

#[tokio::test]
async fn reopen_after_appends_sees_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = cloud_path(&dir);
    let before = {
        let cloud = open(&path, SimConfig::default());
        let p = SimProvider::new(cloud.clone());
        let ids: Vec<String> = p
            .create_nodes(&req("train", Capacity::Spot, 4, "a"))
            .await
            .unwrap()
            .nodes
            .into_iter()
            .map(|n| n.id)
            .collect();
        p.terminate_nodes("us-east-1", &ids[..1]).await.unwrap();
        cloud.interrupt(&pool("train"), 1).unwrap();
        cloud.set_capacity("us-east-1b", Capacity::OnDemand, Some(7)).unwrap();
        cloud.insert_untagged("us-east-1", "us-east-1a", "p4d.24xlarge").unwrap();
        cloud.nodes()
    };
    let cloud = open(&path, SimConfig::default());
    assert_eq!(cloud.nodes(), before);
    let states: Vec<NodeState> = cloud.nodes().iter().map(|n| n.state).collect();
    assert!(states.contains(&NodeState::Terminated) && states.contains(&NodeState::Reclaimed));
    assert_eq!(cloud.capacity("us-east-1b", Capacity::OnDemand), 7);
    // The counter survived too: a new create does not reuse an id.
    let p = SimProvider::new(cloud.clone());
    let new = p.create_nodes(&req("train", Capacity::Spot, 1, "b")).await.unwrap().nodes[0].id.clone();
    assert!(before.iter().all(|n| n.id != new));
}

#[tokio::test]
async fn tokens_are_idempotent_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = cloud_path(&dir);
    let first = {
        let p = SimProvider::new(open(&path, SimConfig::default()));
        p.create_nodes(&req("train", Capacity::OnDemand, 2, "tok")).await.unwrap()
    };
    let cloud = open(&path, SimConfig::default());
    let p = SimProvider::new(cloud.clone());
    let again = p.create_nodes(&req("train", Capacity::OnDemand, 2, "tok")).await.unwrap();
    assert_eq!(again, first);
    assert_eq!(cloud.nodes().len(), 2);
    // A different token creates new nodes.
    p.create_nodes(&req("train", Capacity::OnDemand, 2, "tok2")).await.unwrap();
    assert_eq!(cloud.nodes().len(), 4);
}

#[tokio::test]
async fn a_partial_token_repeats_its_shortfall() {
    let (_dir, cloud, p) = fresh(SimConfig { zone_capacity: Some(1), ..SimConfig::default() });
    let first = p.create_nodes(&req("train", Capacity::Spot, 3, "p")).await.unwrap();
    assert_eq!((first.nodes.len(), first.errors.len()), (1, 1));
    cloud.set_capacity("us-east-1a", Capacity::Spot, None).unwrap();
    assert_eq!(cloud.capacity("us-east-1a", Capacity::Spot), 1, "None restores the configured default");
    cloud.set_capacity("us-east-1a", Capacity::Spot, Some(10)).unwrap();
    let again = p.create_nodes(&req("train", Capacity::Spot, 3, "p")).await.unwrap();
    assert_eq!(again.nodes, first.nodes);
    assert!(again.errors[0].message.contains("placed 1 of 3"), "{}", again.errors[0].message);
}

#[tokio::test]
async fn a_create_appends_to_the_log_and_leaves_the_snapshot_alone() {
    let (dir, _cloud, p) = fresh(SimConfig::default());
    let path = cloud_path(&dir);
    let log = sibling(&path, ".log");
    let snapshot = std::fs::read(&path).unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    p.create_nodes(&req("train", Capacity::Spot, 5, "a")).await.unwrap();
    p.create_nodes(&req("train", Capacity::Spot, 5, "b")).await.unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), snapshot);
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 2, "one line per call:\n{text}");
}

#[tokio::test]
async fn a_torn_last_line_is_ignored_and_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let path = cloud_path(&dir);
    let log = sibling(&path, ".log");
    let kept = {
        let p = SimProvider::new(open(&path, SimConfig::default()));
        p.create_nodes(&req("train", Capacity::Spot, 2, "a")).await.unwrap();
        p.create_nodes(&req("train", Capacity::Spot, 2, "b")).await.unwrap().nodes
    };
    // Simulate a crash mid-write: the last record loses its tail.
    let text = std::fs::read_to_string(&log).unwrap();
    let torn = &text[..text.len() - 40];
    std::fs::write(&log, torn).unwrap();
    let cloud = open(&path, SimConfig::default());
    assert_eq!(cloud.nodes().len(), 2);
    assert!(cloud.nodes().iter().all(|n| !kept.contains(n)));
    // Appends after the repair produce a clean log that replays.
    let p = SimProvider::new(cloud.clone());
    p.create_nodes(&req("train", Capacity::Spot, 1, "c")).await.unwrap();
    drop((p, cloud));
    assert_eq!(open(&path, SimConfig::default()).nodes().len(), 3);
}

#[tokio::test]
async fn compaction_rewrites_the_snapshot_drops_terminated_and_keeps_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let path = cloud_path(&dir);
    let log = sibling(&path, ".log");
    let cloud = SimCloud::open_inner(&path, SimConfig::default(), Duration::from_secs(1), 3, None).unwrap();
    let p = SimProvider::new(cloud.clone());
    let gone = p.create_nodes(&req("train", Capacity::Spot, 1, "a")).await.unwrap().nodes[0].id.clone();
    p.terminate_nodes("us-east-1", std::slice::from_ref(&gone)).await.unwrap();
    p.create_nodes(&req("train", Capacity::Spot, 1, "b")).await.unwrap();
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 3);
    p.create_nodes(&req("train", Capacity::Spot, 1, "c")).await.unwrap();
    // The fourth record passed the threshold: snapshot rewritten, log emptied.
    assert_eq!(std::fs::read(&log).unwrap().len(), 0);
    assert_eq!(cloud.nodes().len(), 2);
    drop((p, cloud));
    let cloud = open(&path, SimConfig::default());
    assert!(cloud.nodes().iter().all(|n| n.id != gone && n.state == NodeState::Running));
    let p = SimProvider::new(cloud.clone());
    assert!(p.create_nodes(&req("train", Capacity::Spot, 1, "a")).await.unwrap().nodes.is_empty());
    assert_eq!(p.list_nodes(&all()).await.unwrap().len(), 2);
}

/// A reclaimed node stays listed for an hour of sim time (as EC2 lists a terminated
/// instance), then compaction forgets it and its launch token: a year of daily reclaims
/// does not grow the world.
#[tokio::test]
async fn compaction_forgets_reclaimed_nodes_an_hour_after_the_reclaim() {
    let dir = tempfile::tempdir().unwrap();
    let path = cloud_path(&dir);
    let cloud = SimCloud::open_inner(&path, SimConfig::default(), Duration::from_secs(1), 3, None).unwrap();
    let p = SimProvider::new(cloud.clone());
    let spot = p.create_nodes(&req("train", Capacity::Spot, 1, "a")).await.unwrap().nodes[0].id.clone();
    assert_eq!(cloud.interrupt(&pool("train"), 1).unwrap(), vec![spot.clone()]);
    for t in ["b", "c"] {
        p.create_nodes(&req("train", Capacity::Spot, 1, t)).await.unwrap();
    }
    // Compacted within the hour: still listed as reclaimed.
    let reclaimed = |c: &SimCloud| c.nodes().into_iter().filter(|n| n.state == NodeState::Reclaimed).count();
    assert_eq!(reclaimed(&cloud), 1);
    cloud.advance(Duration::from_secs(2 * 3600)).unwrap();
    p.create_nodes(&req("train", Capacity::Spot, 1, "d")).await.unwrap();
    for t in ["e", "f"] {
        p.create_nodes(&req("train", Capacity::Spot, 1, t)).await.unwrap();
    }
    assert!(cloud.settle().unwrap(), "a log past the threshold is folded");
    assert_eq!(reclaimed(&cloud), 0, "forgotten an hour after the reclaim");
    assert!(cloud.nodes().iter().all(|n| n.id != spot));
    drop((p, cloud));
    let cloud = open(&path, SimConfig::default());
    assert_eq!(cloud.nodes().len(), 5);
    // Its token went with it: the same token launches anew.
    let p = SimProvider::new(cloud.clone());
    assert_eq!(p.create_nodes(&req("train", Capacity::Spot, 1, "a")).await.unwrap().nodes.len(), 1);
}

/// A log as long as the world (and at least `SETTLE_FROM` records), or one of at least
/// `SETTLE_BYTES` that outgrew the snapshot, is folded into the snapshot; a shorter one
/// is left to be replayed. Either way the next open sees the same world.
#[tokio::test]
async fn settling_folds_a_log_as_long_as_the_world_into_the_snapshot() {
    use crate::providers::sim::store::SETTLE_BYTES;
    let log_bytes = |path: &std::path::Path| std::fs::metadata(sibling(path, ".log")).unwrap().len();
    let (dir, cloud, p) = fresh(roomy());
    let path = cloud_path(&dir);
    p.create_nodes(&req("train", Capacity::OnDemand, 1, "t0")).await.unwrap();
    assert!(!cloud.settle().unwrap(), "a short log stays");
    assert!(log_bytes(&path) > 0);
    // Calls go on until the log outgrows the snapshot: it is folded as it passes.
    let mut i = 1;
    while log_bytes(&path) > 0 {
        assert!(log_bytes(&path) < SETTLE_BYTES, "folded once it held {SETTLE_BYTES} bytes");
        p.create_nodes(&req("train", Capacity::OnDemand, 1, &format!("t{i}"))).await.unwrap();
        i += 1;
    }
    let snapshot = std::fs::metadata(&path).unwrap().len();
    assert!(snapshot > 0 && !cloud.settle().unwrap(), "nothing left to fold");
    let before = cloud.nodes();
    assert_eq!(before.len(), i);
    drop((p, cloud));
    assert_eq!(open(&path, roomy()).nodes(), before);
}

/// Zones with room for every node the settling test launches.
fn roomy() -> SimConfig {
    SimConfig { zone_capacity: Some(1_000_000), ..SimConfig::default() }
}

#[test]
fn corrupt_files_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = cloud_path(&dir);
    drop(open(&path, SimConfig::default()));
    std::fs::write(sibling(&path, ".log"), "garbage\n{\"also\": 1}\n").unwrap();
    let e = SimCloud::open(&path, SimConfig::default()).err().unwrap();
    assert!(matches!(e, SimError::Corrupt { line: Some(1), .. }), "{e}");
    assert!(e.to_string().contains("default.sim.json.log"), "{e}");
    std::fs::write(&path, "{ not json").unwrap();
    let e = SimCloud::open(&path, SimConfig::default()).err().unwrap();
    assert!(e.to_string().contains("not a valid simulated cloud file"), "{e}");
}

#[test]
fn a_second_open_waits_for_the_lock_then_fails_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = cloud_path(&dir);
    let first = open(&path, SimConfig::default());
    let start = Instant::now();
    let e = SimCloud::open_with_timeout(&path, SimConfig::default(), Duration::from_millis(300)).err().unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert!(matches!(e, SimError::Locked { .. }));
    let msg = e.to_string();
    assert!(msg.contains(&path.display().to_string()) && msg.contains("in use"), "{msg}");
    assert!(msg.contains(&format!("pid {}", std::process::id())), "{msg}");
    // Released on drop; a waiting opener gets in once the holder goes away.
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(first);
    });
    SimCloud::open_with_timeout(&path, SimConfig::default(), Duration::from_secs(5)).unwrap();
    t.join().unwrap();
}

/// The files read ahead without the lock are used only while they hold the same bytes:
/// a record another process appended in between is seen, and the cloud reopened from an
/// unchanged read ahead is the cloud a plain open gives.
#[tokio::test]
async fn a_read_ahead_is_used_only_while_the_files_are_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = cloud_path(&dir);
    {
        let cloud = open(&path, SimConfig::default());
        let p = SimProvider::new(cloud.clone());
        p.create_nodes(&req("train", Capacity::Spot, 1, "a")).await.unwrap();
    }
    let stale = crate::providers::sim::Preread::read(&path, u64::MAX).expect("files to read ahead");
    {
        // Another process appends after the read ahead.
        let cloud = open(&path, SimConfig::default());
        let p = SimProvider::new(cloud.clone());
        p.create_nodes(&req("train", Capacity::Spot, 1, "b")).await.unwrap();
    }
    let cloud = SimCloud::open_preread(&path, SimConfig::default(), Some(stale)).unwrap();
    assert_eq!(cloud.nodes().len(), 2, "the stale read ahead must not hide the second node");
    let plain: Vec<String> = cloud.nodes().iter().map(|n| n.id.clone()).collect();
    drop(cloud);
    let fresh = crate::providers::sim::Preread::read(&path, u64::MAX).expect("files to read ahead");
    let cloud = SimCloud::open_preread(&path, SimConfig::default(), Some(fresh)).unwrap();
    assert_eq!(cloud.nodes().iter().map(|n| n.id.clone()).collect::<Vec<_>>(), plain);
    // Appends after opening from a read ahead land in the log and replay.
    let p = SimProvider::new(cloud.clone());
    p.create_nodes(&req("train", Capacity::Spot, 1, "c")).await.unwrap();
    drop((p, cloud));
    assert_eq!(open(&path, SimConfig::default()).nodes().len(), 3);
    // Too large, or a torn log tail: no read ahead (the open under the lock repairs it).
    assert!(crate::providers::sim::Preread::read(&path, 10).is_none());
    let log = sibling(&path, ".log");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut f, b"{\"seq\": 99, \"torn").unwrap();
    assert!(crate::providers::sim::Preread::read(&path, u64::MAX).is_none());
}

/// Every kind of change reads back from a log line as it was written: with `op` first (as
/// gpuplan writes it; three kinds are read without serde's buffer) and with `op` last (a
/// hand-edited log); an unknown `op` is refused either way.
#[test]
fn every_change_reads_back_from_a_log_line_with_op_first_or_last() {
    use crate::providers::JobState;
    use crate::providers::sim::world::{Change, JobEnd, Record, SimJob, SimNode, TokenRecord, TraceRow};
    let node = SimNode {
        id: "i-1".into(),
        pool: Some(pool("train")),
        instance_type: "g6.xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::Spot,
        state: NodeState::Running,
        image: Some("ami-1".into()),
        tags: tags(&pool("train")),
        launched_ms: 7,
        ended_ms: None,
        hardware: None,
    };
    let job = SimJob {
        id: "r-1".into(),
        job: "job.etl".parse().unwrap(),
        pool: pool("train"),
        node_id: "i-1".into(),
        region: "us-east-1".into(),
        attempt: 2,
        token: "t-1".into(),
        started_ms: 1,
        ends_ms: 9,
        will_fail: true,
        ended: None,
        rendezvous: [("GPUPLAN_NODE_RANK".to_string(), "1".to_string())].into(),
    };
    let changes = vec![
        Change::Counter { next: 3 },
        Change::Nodes { nodes: vec![node.clone(), SimNode { pool: None, image: None, tags: Tags::new(), ..node }] },
        Change::NodeState { ids: vec!["i-1".into()], state: NodeState::Terminated },
        Change::Token { token: "gp-\"quoted\"".into(), record: TokenRecord { ids: vec!["i-1".into()], requested: 1 } },
        Change::Limit { zone: "us-east-1b".into(), capacity: Capacity::OnDemand, limit: Some(4) },
        Change::Job { job },
        Change::JobsEnded {
            ids: vec!["r-1".into()],
            end: JobEnd { state: JobState::Failed, at_ms: 5, message: Some("exit 1".into()) },
        },
        Change::Clock { offset_ms: -5 },
        Change::Trace {
            rows: vec![TraceRow {
                at_ms: 0,
                region: "us-east-1".into(),
                gpu: "L4".into(),
                capacity: Capacity::Spot,
                price_usd_gpu_hour: 0.25,
                available_nodes: Some(3),
            }],
        },
        Change::TraceDone { ms: 9 },
    ];
    let record = Record { seq: 4, at_ms: 8, changes };
    let line = serde_json::to_string(&record).unwrap();
    assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), record);
    assert_eq!(serde_json::from_slice::<Record>(line.as_bytes()).unwrap(), record);
    // `op` moved to the end of each change.
    let moved: Vec<String> = record
        .changes
        .iter()
        .map(|c| {
            let text = serde_json::to_string(c).unwrap();
            let (op, rest) = text.strip_prefix('{').unwrap().split_once(',').unwrap();
            format!("{{{},{op}}}", rest.strip_suffix('}').unwrap())
        })
        .collect();
    assert!(moved.iter().all(|c| c.ends_with("\"}") && !c.starts_with("{\"op\"")), "{moved:?}");
    let line = format!("{{\"seq\":4,\"at_ms\":8,\"changes\":[{}]}}", moved.join(","));
    assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), record);
    for unknown in [r#"{"op":"teleport","nodes":[]}"#, r#"{"nodes":[],"op":"teleport"}"#] {
        let line = format!("{{\"seq\":1,\"at_ms\":1,\"changes\":[{unknown}]}}");
        let err = serde_json::from_str::<Record>(&line).unwrap_err().to_string();
        assert!(err.contains("unknown variant `teleport`"), "{err}");
    }
}
