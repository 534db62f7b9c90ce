//! Tests for the local backend, lock, journal and replay: each asserts a contract from
//! `docs/design/files.md` that a plausible bug would break.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;
use crate::model::{Capacity, Node, NodeState};

const NO_WAIT: Duration = Duration::ZERO;

fn backend(dir: &tempfile::TempDir) -> LocalBackend {
    LocalBackend::new(dir.path().join("state").join("default.json"))
}

fn node(pool: &str, id: &str) -> Node {
    Node {
        provider: None,
        id: id.to_string(),
        pool: pool.parse().unwrap(),
        instance_type: "g6.xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::OnDemand,
        state: NodeState::Running,
        image: None,
        tags: crate::model::Tags::new(),
    }
}

fn resource(config: serde_json::Value, nodes: Vec<Node>) -> ResourceState {
    ResourceState {
        kind: "gpu_pool".into(),
        provider: Some("sim".into()),
        provider_kind: Some("sim".into()),
        region: Some("us-east-1".into()),
        config: config.into(),
        sensitive: Vec::new(),
        dependencies: vec![],
        nodes,
        job: None,
        fallback: None,
        placement: None,
        reservation: None,
    }
}

fn put(address: &str, config: serde_json::Value, nodes: Vec<Node>) -> JournalEntry {
    JournalEntry::PutResource { address: address.into(), resource: resource(config, nodes) }
}

fn add(address: &str, ids: &[&str]) -> JournalEntry {
    JournalEntry::AddNodes { address: address.into(), nodes: ids.iter().map(|id| node(address, id)).collect() }
}

fn remove(address: &str, ids: &[&str]) -> JournalEntry {
    JournalEntry::RemoveNodes { address: address.into(), ids: ids.iter().map(|s| s.to_string()).collect() }
}

fn history(event: &str) -> JournalEntry {
    JournalEntry::History {
        entry: HistoryEntry { at: "2025-01-01T00:00:00Z".into(), event: event.into(), detail: String::new() },
    }
}

fn ids(state: &State, address: &str) -> Vec<String> {
    state.resources[address].nodes.iter().map(|n| n.id.clone()).collect()
}

/// A state on disk with one pool, written through the backend (serial 1).
fn seeded(b: &LocalBackend) -> State {
    let lock = b.lock("test", NO_WAIT).unwrap();
    let mut state = State::new("lineage-1".into());
    apply_entry(&mut state, &put("gpu_pool.a", serde_json::json!({"n": 1}), vec![node("gpu_pool.a", "i-1")]));
    b.write(&lock, &mut state).unwrap();
    state
}

/// A GPU fault on a node, first seen at `seen_ms`.
fn fault(seen_ms: u64) -> crate::model::health::Finding {
    use crate::model::health::{Finding, Signal, Source};
    Finding {
        signal: Signal::EccUncorrectable,
        gpu: Some(0),
        pci_bus: None,
        xid: None,
        detail: "2 uncorrectable ECC errors".into(),
        source: Source::NvidiaSmi,
        seen_ms,
    }
}

/// GPU faults recorded for two nodes, then one forgotten.
fn health(set: &[(&str, u64)], remove: &[&str]) -> JournalEntry {
    JournalEntry::Health {
        set: set.iter().map(|(id, at)| (id.to_string(), vec![fault(*at)])).collect(),
        remove: remove.iter().map(|s| s.to_string()).collect(),
    }
}

fn sequence() -> Vec<JournalEntry> {
    vec![
        health(&[("i-1", 5), ("i-2", 6)], &[]),
        put("gpu_pool.b", serde_json::json!({"gpu": "L4"}), vec![]),
        add("gpu_pool.b", &["i-1", "i-2", "i-3"]),
        add("gpu_pool.a", &["i-2", "i-1"]),
        remove("gpu_pool.b", &["i-2", "i-404"]),
        history("apply"),
        add("gpu_pool.b", &["i-2", "i-4", "i-4"]),
        put("gpu_pool.b", serde_json::json!({"gpu": "L4", "v": 2}), vec![]),
        add("gpu_pool.c", &["i-9"]),
        put("gpu_pool.c", serde_json::json!({}), vec![]),
        JournalEntry::DeleteResource { address: "gpu_pool.a".into() },
        remove("gpu_pool.zzz", &["i-1"]),
        put("gpu_pool.d", serde_json::json!({}), vec![node("gpu_pool.d", "x"), node("gpu_pool.d", "x")]),
        health(&[("i-2", 7)], &["i-1", "i-404"]),
    ]
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

// ---- writes -------------------------------------------------------------------------------

#[test]
fn write_is_atomic_keeps_backup_and_bumps_serial_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    assert_eq!(b.read().unwrap(), None);
    let first = seeded(&b);
    assert_eq!(first.serial, 1);
    assert!(!b.backup_path().exists(), "no backup before there was a previous file");
    let first_bytes = fs::read(b.path()).unwrap();

    let lock = b.lock("apply", NO_WAIT).unwrap();
    let mut state = b.read().unwrap().unwrap();
    apply_entry(&mut state, &add("gpu_pool.a", &["i-2"]));
    b.write(&lock, &mut state).unwrap();
    assert_eq!(state.serial, 2, "serial bumped exactly once");
    assert_eq!(b.read().unwrap().unwrap(), state);
    assert_eq!(fs::read(b.backup_path()).unwrap(), first_bytes, "backup holds the previous file");
    let leftovers: Vec<_> = fs::read_dir(b.path().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left behind: {leftovers:?}");
    #[cfg(unix)]
    {
        assert_eq!(mode(b.path()), 0o600);
        assert_eq!(mode(&b.backup_path()), 0o600);
        assert_eq!(mode(&b.lock_path()), 0o600);
    }
}

#[test]
fn write_refuses_a_state_that_does_not_descend_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let mut old = seeded(&b);
    let lock = b.lock("apply", NO_WAIT).unwrap();
    let mut newer = old.clone();
    b.write(&lock, &mut newer).unwrap();
    let err = b.write(&lock, &mut old).unwrap_err();
    assert!(matches!(err, StateError::Stale { expected_serial: 1, found_serial: 2, .. }), "{err:?}");
    assert_eq!(old.serial, 1, "a refused write leaves the caller's serial alone");
}

#[test]
fn write_needs_this_backends_lock() {
    let dir = tempfile::tempdir().unwrap();
    let a = backend(&dir);
    let other = LocalBackend::new(dir.path().join("other.json"));
    let lock = other.lock("apply", NO_WAIT).unwrap();
    let err = a.write(&lock, &mut State::new("l".into())).unwrap_err();
    assert!(matches!(err, StateError::WrongLock { .. }), "{err:?}");
    assert!(!a.path().exists());
}

// ---- corrupt state ------------------------------------------------------------------------

fn assert_corrupt_untouched(content: &[u8], expect_position: bool) {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let mut state = seeded(&b);
    let lock = b.lock("apply", NO_WAIT).unwrap();
    b.write(&lock, &mut state).unwrap(); // now a backup exists
    let backup = fs::read(b.backup_path()).unwrap();
    fs::write(b.path(), content).unwrap();

    let err = b.read().unwrap_err();
    let StateError::Corrupt { path, line, backup: named_backup, .. } = &err else { panic!("{err:?}") };
    assert_eq!(path, b.path());
    assert_eq!(named_backup, &b.backup_path());
    assert_eq!(line.is_some(), expect_position, "{err}");
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(help.contains(&b.backup_path().display().to_string()) && help.contains("cp "), "{help}");

    // Every entry point that would write refuses, and nothing on disk changes.
    assert!(matches!(b.recover(&lock), Err(StateError::Corrupt { .. })));
    assert!(matches!(b.write(&lock, &mut state), Err(StateError::Corrupt { .. })));
    assert!(matches!(b.open_journal(&lock, &state), Err(StateError::Corrupt { .. })));
    assert_eq!(fs::read(b.path()).unwrap(), content);
    assert_eq!(fs::read(b.backup_path()).unwrap(), backup);
    assert!(!b.journal_path().exists());
}

#[test]
fn truncated_state_is_corrupt_with_position_and_untouched() {
    assert_corrupt_untouched(br#"{"format_version":1,"serial":3,"lineage":"x","resources":{"gpu_pool.a":{"ki"#, true);
}

#[test]
fn bad_json_and_missing_fields_are_corrupt() {
    assert_corrupt_untouched(b"not json at all", true);
    assert_corrupt_untouched(br#"{"format_version":1,"lineage":"x"}"#, true);
    assert_corrupt_untouched(b"", true);
    assert_corrupt_untouched(&[0xff, 0xfe, 0x00], true);
}

#[test]
fn an_unsupported_older_format_version_is_corrupt_and_names_the_version() {
    assert_corrupt_untouched(br#"{"format_version":0,"serial":1,"lineage":"x"}"#, false);
    let err = local::parse_state(
        Path::new("s.json"),
        Path::new("s.json.backup"),
        br#"{"format_version":0,"x":[]}"#,
        &Default::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("format_version 0 is not supported"), "{err}");
}

/// A state a newer gpuplan wrote is not damaged: the error says to run that gpuplan, never
/// to restore the `.backup` over it, and nothing on disk changes.
#[test]
fn a_newer_format_version_asks_for_a_newer_gpuplan_not_the_backup() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let mut state = seeded(&b);
    let lock = b.lock("apply", NO_WAIT).unwrap();
    b.write(&lock, &mut state).unwrap(); // now a backup exists
    for content in [&br#"{"format_version":9,"serial":1,"lineage":"x"}"#[..], br#"{"format_version":9,"x":[]}"#] {
        fs::write(b.path(), content).unwrap();
        let err = b.read().unwrap_err();
        assert!(matches!(err, StateError::Newer { .. }), "{err:?}");
        assert!(err.to_string().contains("format_version 9 was written by a newer gpuplan"), "{err}");
        let help = miette::Diagnostic::help(&err).unwrap().to_string();
        assert!(help.contains("newer gpuplan") && !help.contains("cp "), "{help}");
        let written = b.write(&lock, &mut state);
        assert!(written.is_err(), "{written:?}");
        assert_eq!(fs::read(b.path()).unwrap(), content);
    }
    // With the header a writer reads first, the writer's refusal is the same.
    fs::write(b.path(), br#"{"format_version":9,"serial":1,"lineage":"x"}"#).unwrap();
    let written = b.write(&lock, &mut state);
    assert!(matches!(written, Err(StateError::Newer { .. })), "{written:?}");
}

// ---- lock ---------------------------------------------------------------------------------

#[test]
fn second_backend_in_same_process_waits_then_names_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let a = backend(&dir);
    let b = backend(&dir);
    let held = a.lock("apply", NO_WAIT).unwrap();
    assert!(held.stale.is_none());
    assert_eq!(a.lock_info().unwrap().as_ref(), Some(&held.info));

    let start = Instant::now();
    let err = b.lock("plan", Duration::from_millis(350)).unwrap_err();
    assert!(start.elapsed() >= Duration::from_millis(350), "gave up early: {:?}", start.elapsed());
    let StateError::Locked { holder: Some(holder), .. } = &err else { panic!("{err:?}") };
    assert_eq!(holder, &held.info);
    let text = err.to_string();
    assert!(text.contains(&held.info.who) && text.contains(&held.info.pid.to_string()) && text.contains("apply"));
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(help.contains(&format!("gpuplan state unlock {}", held.info.id)) && help.contains("really gone"), "{help}");

    // Zero timeout: exactly one try.
    let start = Instant::now();
    assert!(matches!(b.lock("plan", NO_WAIT), Err(StateError::Locked { .. })));
    assert!(start.elapsed() < Duration::from_millis(90));

    drop(held);
    assert!(!a.lock_path().exists(), "release removes the lock file");
    let again = b.lock("plan", NO_WAIT).unwrap();
    assert!(again.stale.is_none());
}

#[test]
fn waiter_gets_the_lock_when_the_holder_releases() {
    let dir = tempfile::tempdir().unwrap();
    let a = backend(&dir);
    let held = a.lock("apply", NO_WAIT).unwrap();
    let b = backend(&dir);
    let waiter = std::thread::spawn(move || b.lock("plan", Duration::from_secs(10)).map(|l| l.info.operation.clone()));
    std::thread::sleep(Duration::from_millis(250));
    drop(held);
    assert_eq!(waiter.join().unwrap().unwrap(), "plan");
}

#[test]
fn dead_holders_lock_is_taken_over_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    fs::create_dir_all(b.path().parent().unwrap()).unwrap();
    let dead = LockInfo::new("apply");
    fs::write(b.lock_path(), serde_json::to_vec(&dead).unwrap()).unwrap();

    let lock = b.lock("plan", NO_WAIT).unwrap();
    assert_eq!(lock.stale.as_ref(), Some(&dead));
    assert_ne!(lock.info.id, dead.id);
    assert_eq!(b.lock_info().unwrap().as_ref(), Some(&lock.info), "lock file rewritten with the new holder");
}

#[test]
fn unlock_needs_the_exact_id() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    assert!(matches!(b.unlock("nope"), Err(StateError::NotLocked { .. })));
    let held = b.lock("apply", NO_WAIT).unwrap();

    let err = b.unlock("not-the-id").unwrap_err();
    assert!(matches!(&err, StateError::UnlockMismatch { holder, .. } if holder == &held.info), "{err:?}");
    assert!(b.lock_path().exists());

    assert_eq!(b.unlock(&held.info.id).unwrap(), held.info);
    assert!(!b.lock_path().exists());
    // The force-unlocked holder must not write, and must not remove a newer holder's file.
    let newer = b.lock("plan", NO_WAIT).unwrap();
    assert!(matches!(b.write(&held, &mut State::new("l".into())), Err(StateError::LockLost { .. })));
    drop(held);
    assert_eq!(b.lock_info().unwrap().as_ref(), Some(&newer.info));
}

// ---- replay semantics ---------------------------------------------------------------------

#[test]
fn add_nodes_dedups_by_id_and_replaces_in_place() {
    let mut state = State::new("l".into());
    apply_entry(&mut state, &add("gpu_pool.a", &["i-1", "i-2", "i-1"]));
    let mut newer = node("gpu_pool.a", "i-1");
    newer.state = NodeState::Reclaimed;
    apply_entry(&mut state, &JournalEntry::AddNodes { address: "gpu_pool.a".into(), nodes: vec![newer] });
    assert_eq!(ids(&state, "gpu_pool.a"), ["i-1", "i-2"]);
    assert_eq!(state.resources["gpu_pool.a"].nodes[0].state, NodeState::Reclaimed);
    assert_eq!(state.resources["gpu_pool.a"].kind, "gpu_pool", "bare resource gets its kind from the address");
}

#[test]
fn remove_nodes_and_delete_resource() {
    let mut state = State::new("l".into());
    apply_entry(&mut state, &add("gpu_pool.a", &["i-1", "i-2", "i-3"]));
    apply_entry(&mut state, &remove("gpu_pool.a", &["i-2", "i-missing"]));
    assert_eq!(ids(&state, "gpu_pool.a"), ["i-1", "i-3"]);
    apply_entry(&mut state, &remove("gpu_pool.none", &["i-1"]));
    assert!(!state.resources.contains_key("gpu_pool.none"));
    apply_entry(&mut state, &JournalEntry::DeleteResource { address: "gpu_pool.a".into() });
    assert!(state.resources.is_empty());
}

#[test]
fn put_resource_keeps_nodes_unless_it_brings_some() {
    let mut state = State::new("l".into());
    apply_entry(&mut state, &add("gpu_pool.a", &["i-1", "i-2"]));
    apply_entry(&mut state, &put("gpu_pool.a", serde_json::json!({"v": 2}), vec![]));
    assert_eq!(ids(&state, "gpu_pool.a"), ["i-1", "i-2"]);
    assert_eq!(state.resources["gpu_pool.a"].config, serde_json::json!({"v": 2}));
    apply_entry(&mut state, &put("gpu_pool.a", serde_json::json!({"v": 3}), vec![node("gpu_pool.a", "i-9")]));
    assert_eq!(ids(&state, "gpu_pool.a"), ["i-9"]);
}

/// A floating pool put in another provider block (a move across blocks): the nodes that
/// recorded no block live in the old one and say so; those that name one keep it. One
/// entry at a time and a replay agree.
#[test]
fn a_floating_pool_put_in_another_provider_block_keeps_each_node_where_it_lives() {
    let placed = |provider: &str| {
        let mut r = resource(serde_json::json!({"v": 1}), vec![]);
        r.provider = Some(provider.into());
        r.placement = Some(model::PlacementRecord {
            provider: provider.into(),
            region: "us-east-1".into(),
            since_ms: 0,
            short: vec![],
        });
        JournalEntry::PutResource { address: "gpu_pool.a".into(), resource: r }
    };
    let mut moved = node("gpu_pool.a", "i-new");
    moved.provider = Some("sim2".into());
    let entries = [
        placed("sim"),
        add("gpu_pool.a", &["i-old"]),
        JournalEntry::AddNodes { address: "gpu_pool.a".into(), nodes: vec![moved] },
        placed("sim2"),
    ];
    let mut one_by_one = State::new("l".into());
    let mut replay = Replay::new(State::new("l".into()));
    for e in &entries {
        apply_entry(&mut one_by_one, e);
        replay.apply(e);
    }
    let providers: Vec<Option<&str>> =
        one_by_one.resources["gpu_pool.a"].nodes.iter().map(|n| n.provider.as_deref()).collect();
    assert_eq!(providers, [Some("sim"), Some("sim2")]);
    assert_eq!(replay.finish(), one_by_one);
    // A pool that is not floating keeps its nodes as they are.
    let mut plain = State::new("l".into());
    apply_entry(&mut plain, &put("gpu_pool.a", serde_json::json!({}), vec![node("gpu_pool.a", "i-1")]));
    let mut r = resource(serde_json::json!({}), vec![]);
    r.provider = Some("sim2".into());
    apply_entry(&mut plain, &JournalEntry::PutResource { address: "gpu_pool.a".into(), resource: r });
    assert_eq!(plain.resources["gpu_pool.a"].nodes[0].provider, None);
}

#[test]
fn history_is_capped_to_the_newest() {
    let mut one_by_one = State::new("l".into());
    let mut replay = Replay::new(State::new("l".into()));
    for i in 0..model::HISTORY_LIMIT + 7 {
        let e = history(&format!("e{i}"));
        apply_entry(&mut one_by_one, &e);
        replay.apply(&e);
    }
    assert_eq!(one_by_one.history.len(), model::HISTORY_LIMIT);
    assert_eq!(one_by_one.history[0].event, "e7");
    assert_eq!(replay.finish(), one_by_one);
}

#[test]
fn replay_equals_applying_entries_one_by_one() {
    let mut base = State::new("l".into());
    apply_entry(&mut base, &put("gpu_pool.a", serde_json::json!({}), vec![node("gpu_pool.a", "i-0")]));
    let mut expected = base.clone();
    let mut replay = Replay::new(base);
    for e in sequence() {
        apply_entry(&mut expected, &e);
        replay.apply(&e);
    }
    let got = replay.finish();
    assert_eq!(got, expected);
    assert_eq!(ids(&got, "gpu_pool.b"), ["i-1", "i-3", "i-2", "i-4"]);
    assert_eq!(ids(&got, "gpu_pool.c"), ["i-9"]);
    assert_eq!(ids(&got, "gpu_pool.d"), ["x"]);
    assert!(!got.resources.contains_key("gpu_pool.a"));
    // GPU faults: a later record replaces a node's, and a forgotten node is gone.
    assert_eq!(got.health.iter().map(|(id, f)| (id.as_str(), f[0].seen_ms)).collect::<Vec<_>>(), [("i-2", 7)]);
}

/// Resources with few nodes are searched by scan, larger ones through an index by id:
/// both give what applying the entries one by one gives, across the switch between them.
#[test]
fn replay_equals_applying_entries_one_by_one_below_and_above_the_node_index() {
    let many = |from: usize, to: usize| -> Vec<String> { (from..to).map(|i| format!("i-{i}")).collect() };
    let add_ids = |address: &str, ids: &[String]| -> JournalEntry {
        add(address, &ids.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let remove_ids = |address: &str, ids: &[String]| -> JournalEntry {
        remove(address, &ids.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let mut base = State::new("l".into());
    apply_entry(&mut base, &put("gpu_pool.a", serde_json::json!({}), vec![node("gpu_pool.a", "i-0")]));
    let mut reclaimed = node("gpu_pool.a", "i-3");
    reclaimed.state = NodeState::Reclaimed;
    let entries = vec![
        add_ids("gpu_pool.a", &many(1, 10)),
        remove_ids("gpu_pool.a", &many(2, 5)),
        // Crosses the threshold within one entry, with an id twice and a removed one back.
        add_ids("gpu_pool.a", &[many(10, 30), many(12, 13), many(3, 4)].concat()),
        remove_ids("gpu_pool.a", &[many(20, 25), many(90, 91)].concat()),
        JournalEntry::AddNodes { address: "gpu_pool.a".into(), nodes: vec![reclaimed] },
        add_ids("gpu_pool.a", &many(21, 23)),
        put("gpu_pool.a", serde_json::json!({"v": 2}), vec![]),
        add_ids("gpu_pool.b", &[many(0, 3), many(1, 2)].concat()),
        remove_ids("gpu_pool.b", &many(0, 1)),
        put(
            "gpu_pool.c",
            serde_json::json!({}),
            (0..20).map(|i| node("gpu_pool.c", &format!("i-{}", i % 17))).collect(),
        ),
        remove_ids("gpu_pool.c", &many(5, 6)),
        add_ids("gpu_pool.c", &many(5, 6)),
    ];
    let mut expected = base.clone();
    let mut replay = Replay::new(base);
    for e in entries {
        apply_entry(&mut expected, &e);
        replay.apply_owned(e);
    }
    let got = replay.finish();
    assert_eq!(got, expected);
    let a = ids(&got, "gpu_pool.a");
    assert_eq!(a.len(), 1 + 9 - 3 + 20 + 1 - 5 + 2);
    assert_eq!(a.iter().filter(|id| *id == "i-3").count(), 1);
    assert_eq!(got.resources["gpu_pool.a"].nodes.iter().find(|n| n.id == "i-3").unwrap().state, NodeState::Reclaimed);
    assert_eq!(ids(&got, "gpu_pool.b"), ["i-1", "i-2"]);
    assert_eq!(ids(&got, "gpu_pool.c").len(), 17);
    assert_eq!(ids(&got, "gpu_pool.c").last().map(String::as_str), Some("i-5"));
}

#[test]
fn journal_entry_wire_format() {
    let json = serde_json::to_value(remove("gpu_pool.a", &["i-1"])).unwrap();
    assert_eq!(json, serde_json::json!({"op": "remove_nodes", "address": "gpu_pool.a", "ids": ["i-1"]}));
}

// ---- journal on disk ----------------------------------------------------------------------

/// Seed a state, append `sequence()` to a journal in batches, and drop it as a crash would.
fn crashed_apply(b: &LocalBackend) -> (State, State) {
    let base = seeded(b);
    let lock = b.lock("apply", NO_WAIT).unwrap();
    let mut journal = b.open_journal(&lock, &base).unwrap();
    let entries = sequence();
    journal.append(&entries[..3]).unwrap();
    journal.append(&entries[3..]).unwrap();
    journal.append(&[]).unwrap();
    assert_eq!(journal.entries(), entries.len());
    let mut expected = base.clone();
    entries.iter().for_each(|e| apply_entry(&mut expected, e));
    (base, expected)
}

#[test]
fn journal_replays_on_read_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let (_, expected) = crashed_apply(&b);
    #[cfg(unix)]
    assert_eq!(mode(&b.journal_path()), 0o600);
    let first_line = fs::read_to_string(b.journal_path()).unwrap().lines().next().unwrap().to_string();
    assert_eq!(first_line, r#"{"journal":1,"lineage":"lineage-1","base_serial":1}"#);
    let before = fs::read(b.path()).unwrap();
    assert_eq!(b.read().unwrap().unwrap(), expected);
    assert_eq!(fs::read(b.path()).unwrap(), before, "read never writes");
    assert!(b.journal_path().exists());
}

#[test]
fn recover_compacts_the_journal_into_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let (_, mut expected) = crashed_apply(&b);
    let lock = b.lock("plan", NO_WAIT).unwrap();
    let mut plain = expected.clone();
    assert!(matches!(b.write(&lock, &mut plain), Err(StateError::PendingJournal { .. })));
    assert!(matches!(b.open_journal(&lock, &expected), Err(StateError::PendingJournal { .. })));

    let recovered = b.recover(&lock).unwrap().unwrap();
    expected.serial = 2;
    assert_eq!(recovered, expected);
    assert!(!b.journal_path().exists());
    assert_eq!(b.read().unwrap().unwrap(), expected);
    assert_eq!(b.recover(&lock).unwrap().unwrap().serial, 2, "nothing left to recover: no write");
}

#[test]
fn journal_without_state_file_starts_from_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let lock = b.lock("apply", NO_WAIT).unwrap();
    let base = State::new("fresh".into());
    let mut journal = b.open_journal(&lock, &base).unwrap();
    journal.append(&[add("gpu_pool.a", &["i-1"])]).unwrap();
    drop(journal);
    let state = b.read().unwrap().unwrap();
    assert_eq!((state.lineage.as_str(), state.serial), ("fresh", 0));
    assert_eq!(ids(&state, "gpu_pool.a"), ["i-1"]);
    assert_eq!(b.recover(&lock).unwrap().unwrap().serial, 1);
    assert!(b.path().exists() && !b.journal_path().exists());
}

#[test]
fn torn_last_line_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let (base, _) = crashed_apply(&b);
    let full = fs::read(b.journal_path()).unwrap();
    let mut expected = base.clone();
    sequence().iter().for_each(|e| apply_entry(&mut expected, e));

    // A partial append: no trailing newline, even if the bytes happen to be valid JSON.
    for tail in [&br#"{"op":"delete_reso"#[..], br#"{"op":"delete_resource","address":"gpu_pool.b"}"#, b"\0\0\0\0"] {
        let mut torn = full.clone();
        torn.extend_from_slice(tail);
        fs::write(b.journal_path(), &torn).unwrap();
        assert_eq!(b.read().unwrap().unwrap(), expected, "tail {:?}", String::from_utf8_lossy(tail));
    }
    // Garbage lines at the very end (zero-filled blocks after a crash) are torn too.
    let mut torn = full.clone();
    torn.extend_from_slice(b"\0\0\0\n\0\0\n");
    fs::write(b.journal_path(), &torn).unwrap();
    assert_eq!(b.read().unwrap().unwrap(), expected);
}

#[test]
fn damage_before_a_valid_line_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    crashed_apply(&b);
    let text = fs::read_to_string(b.journal_path()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{garbage";
    fs::write(b.journal_path(), lines.join("\n") + "\n").unwrap();
    let err = b.read().unwrap_err();
    assert!(matches!(err, StateError::JournalCorrupt { line: 3, .. }), "{err:?}");
}

#[test]
fn a_journal_entry_for_a_key_that_is_not_an_address_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    crashed_apply(&b);
    let mut text = fs::read_to_string(b.journal_path()).unwrap();
    let line = text.lines().count() + 1;
    // Well-formed and newline-terminated: not a torn append, so it is not ignored.
    text.push_str(r#"{"op":"add_nodes","address":"gpu_pool..bad","nodes":[]}"#);
    text.push('\n');
    fs::write(b.journal_path(), &text).unwrap();
    let err = b.read().unwrap_err();
    let StateError::JournalCorrupt { line: at, message, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*at, line);
    assert!(message.contains("`gpu_pool..bad` is not a resource address"), "{message}");
}

#[test]
fn a_state_key_that_is_not_an_address_is_refused_with_the_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    fs::create_dir_all(b.path().parent().unwrap()).unwrap();
    for (text, key) in [
        (
            r#"{"format_version":1,"serial":1,"lineage":"x","resources":{"gpu_pool..bad":{"kind":"gpu_pool"}}}"#,
            "gpu_pool..bad",
        ),
        (r#"{"format_version":1,"serial":1,"lineage":"x","resources":{"train":{"kind":"gpu_pool"}}}"#, "train"),
        (
            r#"{"format_version":1,"serial":1,"lineage":"x","autoscale":{"pool.x":{"at":"t","from":1,"to":2,"reason":"r"}}}"#,
            "pool.x",
        ),
    ] {
        fs::write(b.path(), text).unwrap();
        let err = b.read().unwrap_err();
        let StateError::BadAddress { path, key: found, .. } = &err else { panic!("{err:?}") };
        assert_eq!((path.as_path(), found.as_str()), (b.path(), key));
        let shown = err.to_string();
        assert!(shown.contains("default.json") && shown.contains(&format!("`{key}`")), "{shown}");
        let help = miette::Diagnostic::help(&err).unwrap().to_string();
        assert!(help.contains("nothing was written") && help.contains("gpu_pool.train"), "{help}");
        assert_eq!(fs::read_to_string(b.path()).unwrap(), text, "reading never writes");
    }
}

#[test]
fn journal_header_mismatch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    crashed_apply(&b);
    let text = fs::read_to_string(b.journal_path()).unwrap();
    let lock = b.lock("plan", NO_WAIT).unwrap();
    for header in [
        r#"{"journal":1,"lineage":"someone-else","base_serial":1}"#,
        r#"{"journal":1,"lineage":"lineage-1","base_serial":0}"#,
        r#"{"journal":1,"lineage":"lineage-1","base_serial":7}"#,
    ] {
        let rest = text.split_once('\n').unwrap().1;
        fs::write(b.journal_path(), format!("{header}\n{rest}")).unwrap();
        let before = fs::read(b.path()).unwrap();
        assert!(matches!(b.read(), Err(StateError::JournalMismatch { .. })), "{header}");
        assert!(matches!(b.recover(&lock), Err(StateError::JournalMismatch { .. })), "{header}");
        assert_eq!(fs::read(b.path()).unwrap(), before);
    }
    fs::write(b.journal_path(), "{\"journal\":2,\"lineage\":\"lineage-1\",\"base_serial\":1}\n").unwrap();
    assert!(matches!(b.read(), Err(StateError::JournalCorrupt { line: 1, .. })));
}

#[test]
fn crash_between_compaction_write_and_journal_removal_is_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let (_, expected) = crashed_apply(&b);
    let journal = fs::read(b.journal_path()).unwrap();
    let lock = b.lock("plan", NO_WAIT).unwrap();
    b.recover(&lock).unwrap();
    fs::write(b.journal_path(), &journal).unwrap(); // as if the removal never happened

    let state = b.read().unwrap().unwrap();
    assert_eq!((state.serial, &state.resources), (2, &expected.resources), "not replayed twice");
    assert_eq!(state.history.len(), 1);
    b.recover(&lock).unwrap();
    assert!(!b.journal_path().exists());
    assert_eq!(b.read().unwrap().unwrap().serial, 2, "removing the stale journal needs no write");
}

/// Compaction makes the state durable (the file, then its folder for the rename) and
/// leaves the journal's removal unsynced; a crash that loses the removal leaves a journal
/// the next command proves folded: nothing replayed twice, nothing lost.
#[test]
fn compaction_syncs_the_state_only_and_a_lost_journal_removal_is_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let mut state = seeded(&b);
    let lock = b.lock("apply", NO_WAIT).unwrap();
    let mut journal = b.open_journal(&lock, &state).unwrap();
    let mut expected = state.clone();
    for e in sequence() {
        apply_entry(&mut expected, &e);
        journal.append(std::slice::from_ref(&e)).unwrap();
    }
    let journal_bytes = fs::read(b.journal_path()).unwrap();
    let before = super::fsutil::SYNCS.with(|c| c.get());
    b.compact(&lock, journal, &mut state).unwrap();
    let syncs = super::fsutil::SYNCS.with(|c| c.get()) - before;
    assert_eq!(syncs, 2, "the new state file and its folder, nothing for the journal's removal");
    expected.serial = 2;
    assert_eq!(state, expected);

    // A crash lost the unsynced removal: the journal is back beside the compacted state.
    fs::write(b.journal_path(), &journal_bytes).unwrap();
    assert_eq!(b.read().unwrap().unwrap(), expected, "not replayed a second time");
    b.recover(&lock).unwrap();
    assert!(!b.journal_path().exists());
    assert_eq!(b.read().unwrap().unwrap(), expected, "removing it needed no write");
}

/// An apply's closing history lines go into the state with the compaction, never through
/// a synced append; a crash that then loses the journal's removal leaves a journal without
/// those lines beside a state with them, still proven folded.
#[test]
fn closing_history_lines_are_written_by_the_compaction_and_a_lost_removal_is_still_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let mut state = seeded(&b);
    let lock = b.lock("apply", NO_WAIT).unwrap();
    let mut journal = b.open_journal(&lock, &state).unwrap();
    let mut expected = state.clone();
    for e in sequence() {
        apply_entry(&mut expected, &e);
        journal.append(std::slice::from_ref(&e)).unwrap();
    }
    let journal_bytes = fs::read(b.journal_path()).unwrap();
    let appends = journal.appends();
    let closing = vec![history("apply"), history("policy_override")];
    closing.iter().for_each(|e| apply_entry(&mut expected, e));
    journal.fold_unwritten(closing);
    assert_eq!(journal.appends(), appends, "no append");
    assert_eq!(fs::read(b.journal_path()).unwrap(), journal_bytes, "nothing written to the journal");
    b.compact(&lock, journal, &mut state).unwrap();
    expected.serial = 2;
    assert_eq!(state, expected);
    let events: Vec<&str> = state.history.iter().rev().take(2).map(|h| h.event.as_str()).collect();
    assert_eq!(events, ["policy_override", "apply"]);

    fs::write(b.journal_path(), &journal_bytes).unwrap(); // the removal was lost
    assert_eq!(b.read().unwrap().unwrap(), expected, "proven folded, not replayed again");
    b.recover(&lock).unwrap();
    assert!(!b.journal_path().exists());
    assert_eq!(b.read().unwrap().unwrap(), expected);
}

/// What the proof allows: lines added at the end (the oldest dropped past the limit),
/// never lines changed, removed or put in the middle.
#[test]
fn history_extends_only_by_lines_at_its_end() {
    use super::replay::history_extends;
    let line =
        |n: usize| crate::state::model::HistoryEntry { at: n.to_string(), event: "e".into(), detail: String::new() };
    let lines = |r: std::ops::Range<usize>| r.map(line).collect::<Vec<_>>();
    assert!(history_extends(&lines(0..3), &lines(0..4)));
    assert!(history_extends(&lines(0..3), &lines(0..6)));
    assert!(history_extends(&[], &lines(0..2)));
    // At the limit, the oldest lines make room.
    assert!(history_extends(&lines(0..100), &lines(2..102)));
    assert!(history_extends(&lines(0..99), &lines(1..101)));
    assert!(!history_extends(&lines(0..3), &lines(0..3)), "nothing added");
    assert!(!history_extends(&lines(0..3), &lines(1..4)), "a line dropped below the limit");
    assert!(!history_extends(&lines(0..3), &[line(0), line(9), line(2), line(3)]), "a line changed");
    assert!(!history_extends(&lines(0..3), &lines(0..2)));
}

#[test]
fn compact_writes_once_and_removes_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let mut state = seeded(&b);
    let lock = b.lock("apply", NO_WAIT).unwrap();
    let mut journal = b.open_journal(&lock, &state).unwrap();
    let mut expected = state.clone();
    for e in sequence() {
        apply_entry(&mut expected, &e);
        journal.append(std::slice::from_ref(&e)).unwrap();
    }
    b.compact(&lock, journal, &mut state).unwrap();
    expected.serial = 2;
    assert_eq!(state, expected);
    assert_eq!(b.read().unwrap().unwrap(), expected);
    assert!(!b.journal_path().exists());
    assert_eq!(b.read().unwrap().unwrap().serial, 2);
}

#[test]
fn open_journal_refuses_a_base_that_is_not_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let mut state = seeded(&b);
    state.serial = 0;
    let lock = b.lock("apply", NO_WAIT).unwrap();
    assert!(matches!(b.open_journal(&lock, &state), Err(StateError::Stale { .. })));
    assert!(!b.journal_path().exists());
}

#[test]
fn hundred_thousand_entries_append_and_compact() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let mut state = State::new("big".into());
    let lock = b.lock("apply", NO_WAIT).unwrap();
    let mut journal = b.open_journal(&lock, &state).unwrap();
    // All nodes in one pool: a quadratic replay (scan per entry) would not finish in time.
    let mut batch = vec![put("gpu_pool.big", serde_json::json!({}), vec![])];
    for i in 0..100_000 {
        batch.push(JournalEntry::AddNodes {
            address: "gpu_pool.big".into(),
            nodes: vec![node("gpu_pool.big", &format!("i-{i}"))],
        });
        if batch.len() == 1_000 {
            journal.append(&batch).unwrap();
            batch.clear();
        }
    }
    journal.append(&batch).unwrap();
    journal.append(&[remove("gpu_pool.big", &["i-0", "i-99999"])]).unwrap();
    assert_eq!(journal.entries(), 100_002);
    assert_eq!(b.read().unwrap().unwrap().resources["gpu_pool.big"].nodes.len(), 99_998);
    b.compact(&lock, journal, &mut state).unwrap();
    assert_eq!(state.serial, 1);
    assert_eq!(state.resources["gpu_pool.big"].nodes.len(), 99_998);
    assert!(!b.journal_path().exists());
}

#[test]
fn arbitrary_bytes_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    seeded(&b);
    let samples: [&[u8]; 6] = [b"\n", b"\n\n\n", b"{}\n", b"[1,2]\n{\"op\":1}\n", &[0xff; 64], b"{\"journal\":1}\n"];
    for bytes in samples {
        fs::write(b.journal_path(), bytes).unwrap();
        assert!(b.read().is_err(), "{:?}", String::from_utf8_lossy(bytes));
    }
    fs::write(b.lock_path(), b"\xff garbage").unwrap();
    assert_eq!(b.lock_info().unwrap(), None);
    assert!(matches!(b.unlock("x"), Err(StateError::NotLocked { .. })));
}

#[test]
fn sibling_file_names() {
    let b = LocalBackend::new("state/prod.json");
    let names = [b.backup_path(), b.lock_path(), b.journal_path()];
    assert_eq!(
        names.map(|p| p.display().to_string()),
        ["state/prod.json.backup", "state/prod.json.lock", "state/prod.json.journal"]
    );
}

#[test]
fn a_fallback_retries_after_the_wait_doubling_per_failed_try_up_to_a_day() {
    use crate::state::model::FallbackRecord;
    let min = 60_000;
    let rec = |failed_retries| FallbackRecord { since_ms: 0, tried_ms: 1_000, failed_retries, reason: String::new() };
    let base = std::time::Duration::from_secs(30 * 60);
    assert_eq!(rec(0).retry_at(base), 1_000 + 30 * min);
    assert_eq!(rec(1).retry_at(base), 1_000 + 60 * min);
    assert_eq!(rec(3).retry_at(base), 1_000 + 240 * min);
    assert_eq!(rec(6).retry_at(base), 1_000 + 24 * 60 * min, "capped at 24 h");
    assert_eq!(rec(u32::MAX).retry_at(base), 1_000 + 24 * 60 * min, "no overflow");
}

#[test]
fn a_remote_lock_is_abandoned_only_once_seen_unchanged_for_the_longer_ttl_and_test_timings_come_from_the_environment() {
    use crate::state::lock::LockTiming;
    use std::time::{Duration, SystemTime};
    let minute = Duration::from_secs(60);
    let mut info = LockInfo::new("apply");
    assert!(!info.abandoned(Duration::from_secs(3600), minute), "no `expires`: it renews nothing, never abandoned");
    // `expires` is read by people only: a holder whose clock runs an hour slow wrote an
    // `expires` long past by any other clock, and its lock is not abandoned for that.
    info.extend(SystemTime::now() - Duration::from_secs(3600), minute);
    assert_eq!(info.ttl_ms, Some(60_000));
    assert!(!info.abandoned(Duration::from_secs(59), minute));
    assert!(info.abandoned(minute, minute));
    // A waiter with a shorter TTL than the holder's waits for the holder's.
    assert!(!info.abandoned(Duration::from_secs(30), Duration::from_secs(2)));
    // And a holder with a shorter one for the waiter's.
    info.extend(SystemTime::now(), Duration::from_secs(2));
    assert!(!info.abandoned(Duration::from_secs(30), minute));
    assert!(info.describe().starts_with("`gpuplan apply` by "), "{}", info.describe());

    let env = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(LockTiming::from_env(&env(&[])).unwrap(), LockTiming::default());
    assert_eq!(
        LockTiming::from_env(&env(&[("GPUPLAN_LOCK_TTL", "2s"), ("GPUPLAN_LOCK_RENEW", "500ms")])).unwrap(),
        LockTiming { ttl: Duration::from_secs(2), renew: Duration::from_millis(500) }
    );
    assert!(LockTiming::from_env(&env(&[("GPUPLAN_LOCK_TTL", "10s"), ("GPUPLAN_LOCK_RENEW", "10s")])).is_err());
    assert!(LockTiming::from_env(&env(&[("GPUPLAN_LOCK_TTL", "soon")])).is_err());
}

/// The state file read ahead without the lock is used only while the file holds the same
/// bytes: a write in between is seen, gpuplan's (a replace) or another program's (in
/// place), and an unchanged read ahead gives what a plain recover gives.
#[test]
fn a_state_read_ahead_is_used_only_while_the_file_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    seeded(&b);
    let stale = local::Preread::read(b.path(), u64::MAX).expect("a state to read ahead");
    {
        let lock = b.lock("test", NO_WAIT).unwrap();
        let mut state = b.recover(&lock).unwrap().unwrap();
        apply_entry(&mut state, &add("gpu_pool.a", &["i-2"]));
        b.write(&lock, &mut state).unwrap();
    }
    let lock = b.lock("test", NO_WAIT).unwrap();
    let state = b.recover_preread(&lock, Some(stale)).unwrap().unwrap();
    assert_eq!(ids(&state, "gpu_pool.a"), ["i-1", "i-2"], "the stale read ahead must not hide the write");
    let plain = b.recover(&lock).unwrap().unwrap();
    let fresh = local::Preread::read(b.path(), u64::MAX).expect("a state to read ahead");
    let ahead = b.recover_preread(&lock, Some(fresh)).unwrap().unwrap();
    assert_eq!(serde_json::to_value(&ahead).unwrap(), serde_json::to_value(&plain).unwrap());
    assert_eq!(ahead.serial, plain.serial);
    // Another program edits the file in place (the same length, so a mapping of it shows
    // the edit): the read ahead is not used.
    let before_edit = local::Preread::read(b.path(), u64::MAX).expect("a state to read ahead");
    let text = fs::read_to_string(b.path()).unwrap();
    let edited = text.replacen("\"i-2\"", "\"i-9\"", 1);
    assert_eq!(edited.len(), text.len());
    {
        use std::io::Write;
        fs::OpenOptions::new().write(true).open(b.path()).unwrap().write_all(edited.as_bytes()).unwrap();
    }
    let state = b.recover_preread(&lock, Some(before_edit)).unwrap().unwrap();
    assert_eq!(ids(&state, "gpu_pool.a"), ["i-1", "i-9"], "the read ahead must not hide an in-place edit");
    // A file of another path, or one too large, is not read ahead or not used.
    let other = LocalBackend::new(dir.path().join("state").join("other.json"));
    let elsewhere = local::Preread::read(b.path(), u64::MAX).unwrap();
    let lock_other = other.lock("test", NO_WAIT).unwrap();
    assert!(other.recover_preread(&lock_other, Some(elsewhere)).unwrap().is_none());
    assert!(local::Preread::read(b.path(), 10).is_none());
}

/// `holds` compares a file with bytes read earlier, piece by piece: equal only for the
/// same bytes, including a difference in the last byte of a 64 KiB piece or past it, a
/// file longer or shorter by one byte, and a missing file (equal only to "no file").
#[test]
fn a_file_holds_only_the_exact_bytes_read_earlier() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(&path, &bytes).unwrap();
    assert!(holds(&path, Some(&bytes)).unwrap());
    assert!(!holds(&path, None).unwrap());
    for at in [0, (1 << 16) - 1, 1 << 16, bytes.len() - 1] {
        let mut other = bytes.clone();
        other[at] ^= 1;
        assert!(!holds(&path, Some(&other)).unwrap(), "byte {at} differs");
    }
    assert!(!holds(&path, Some(&bytes[..bytes.len() - 1])).unwrap());
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(!holds(&path, Some(&longer)).unwrap());
    fs::write(&path, b"").unwrap();
    assert!(holds(&path, Some(b"")).unwrap());
    fs::remove_file(&path).unwrap();
    assert!(holds(&path, None).unwrap());
    assert!(!holds(&path, Some(b"")).unwrap());
}

/// `read_whole` maps a file (the read-ahead's zero-copy read) and reads an empty one;
/// `still_at` tells whether the file still holds what was read: not after an in-place
/// write (which a mapping shows), a replace by rename (as every write of state or sim
/// snapshot does; the mapping keeps the bytes that were read) or a removal.
#[test]
fn a_file_read_whole_is_still_at_its_path_only_while_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    assert!(read_whole(&path).unwrap().is_none(), "a missing file is none");
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    fs::write(&path, &bytes).unwrap();
    let read = read_whole(&path).unwrap().unwrap();
    assert!(matches!(read, FileBytes::Mapped(..)), "{read:?}");
    assert_eq!(&read[..], &bytes[..]);
    assert!(read.still_at(&path).unwrap(), "unchanged");
    // Written in place, the same length: the mapping shows the new bytes, so only the
    // file's times tell that it is not what was parsed.
    let mut changed = bytes.clone();
    changed[1_000] ^= 1;
    {
        use std::io::{Seek, Write};
        let mut f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.write_all(&changed).unwrap();
    }
    assert_eq!(&read[..], &changed[..], "a mapping shows an in-place write");
    assert!(!read.still_at(&path).unwrap(), "written in place since");
    let read = read_whole(&path).unwrap().unwrap();
    assert!(read.still_at(&path).unwrap());
    let tmp = dir.path().join("state.json.tmp");
    fs::write(&tmp, b"{\"replaced\": true}").unwrap();
    fs::rename(&tmp, &path).unwrap();
    assert_eq!(&read[..], &changed[..], "the mapping keeps the replaced file's bytes");
    assert!(!holds(&path, Some(&read)).unwrap());
    assert!(!read.still_at(&path).unwrap(), "replaced");
    fs::remove_file(&path).unwrap();
    assert!(!read.still_at(&path).unwrap(), "removed");
    fs::write(&tmp, b"").unwrap();
    fs::rename(&tmp, &path).unwrap();
    let empty = read_whole(&path).unwrap().unwrap();
    assert!(matches!(empty, FileBytes::Read(ref v) if v.is_empty()), "{empty:?}");
    assert!(holds(&path, Some(&empty)).unwrap());
    assert!(empty.still_at(&path).unwrap());
}

/// The state file is the text `serde_json::to_writer_pretty` writes for the state as
/// stored (its nodes without the tags gpuplan derives: `migrate::pack`), byte for byte,
/// with its maps rendered on the cores in rounds: every field filled (and every one left
/// empty), keys that need escaping, and more resources and ledger lines than one round.
#[test]
fn the_state_file_is_the_pretty_printers_text_byte_for_byte() {
    let empty = State::new("00000000-0000-4000-8000-000000000000".into());
    let mut full = empty.clone();
    full.serial = 7;
    for i in 0..20_000 {
        let address = if i == 3 { "gpu_pool.a[\"q\\\"\\n\"]".to_string() } else { format!("gpu_pool.p{i:06}") };
        let mut nodes = vec![node("gpu_pool.x", &format!("i-{i}"))];
        nodes[0].tags.insert("gpuplan:address", &address);
        let mut r = resource(serde_json::json!({"gpu": "L4", "nodes": {"desired": i % 3}, "zones": []}), nodes);
        r.dependencies = if i % 2 == 0 { vec!["quota.q".into()] } else { vec![] };
        r.fallback = (i % 5 == 0).then(|| super::model::FallbackRecord {
            since_ms: 1,
            tried_ms: 2,
            failed_retries: 3,
            reason: "us-east-1a had no capacity".into(),
        });
        full.resources.insert(address, r);
        let line = super::model::SpendEntry {
            pool: format!("gpu_pool.p{i:06}"),
            provider: "sim".into(),
            job: (i % 7 == 0).then(|| "job.j".to_string()),
            instance_type: "g6.xlarge".into(),
            capacity: Capacity::Spot,
            usd_per_hour: 0.1 + i as f64 / 3.0,
            price_source: "catalog (as of 2026-01-15)".into(),
            start_ms: i,
            end_ms: (i % 2 == 1).then_some(i + 5),
        };
        full.spend.insert(format!("i-{i}"), line);
    }
    full.history.push(HistoryEntry { at: "2025-01-01T00:00:00Z".into(), event: "apply".into(), detail: "x".into() });
    full.autoscale
        .insert("gpu_pool.p000001".into(), ScaleRecord { at: "t".into(), from: 1, to: 2, reason: "r".into() });
    full.alerts.insert("quota.q".into(), [("2026-03".to_string(), vec![50, 80])].into());
    full.history_summary = Some(super::model::HistorySummary {
        from: "2024-01-01T00:00:00Z".into(),
        to: "2024-12-31T00:00:00Z".into(),
        events: [("apply".to_string(), 12)].into(),
    });
    full.spend_months.insert("2024-12".into(), super::model::MonthSpend { usd: 1.5, lines: 2, ..Default::default() });
    let mut one = empty.clone();
    one.resources.insert("gpu_pool.a".into(), resource(serde_json::json!({}), vec![]));
    for state in [&empty, &one, &full] {
        let mut ours = Vec::new();
        super::pretty::write_state(&mut ours, state).unwrap();
        let mut stored = state.clone();
        for r in stored.resources.values_mut() {
            *r = super::migrate::pack(r, &state.lineage).into_owned();
        }
        let theirs = serde_json::to_vec_pretty(&stored_form(&stored)).unwrap();
        assert!(ours == theirs, "differs at byte {:?}", ours.iter().zip(&theirs).position(|(a, b)| a != b));
    }
}

/// A state as format 3 stores it, for serde's pretty printer on one thread: the derived
/// form (every field in its order, with its `skip_serializing_if`), the resources and the
/// ledger in their stored forms.
#[derive(serde::Serialize)]
struct StoredForm<'a> {
    format_version: u32,
    serial: u64,
    lineage: &'a str,
    resources: BTreeMap<&'a String, super::stored::ResourceOut<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    history: Vec<&'a HistoryEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    history_summary: Option<&'a super::model::HistorySummary>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    autoscale: BTreeMap<&'a String, &'a ScaleRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spend: Option<super::stored::LedgerOut<'a>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    spend_months: BTreeMap<&'a String, &'a super::model::MonthSpend>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    alerts: BTreeMap<&'a String, &'a BTreeMap<String, Vec<u32>>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    outputs: BTreeMap<&'a String, &'a super::model::OutputState>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    standing: BTreeMap<&'a String, &'a super::model::StandingRecord>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    repairs: BTreeMap<&'a String, &'a Vec<u64>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    health: BTreeMap<&'a String, &'a Vec<crate::model::health::Finding>>,
}

fn stored_form(state: &State) -> StoredForm<'_> {
    let State {
        format_version,
        serial,
        lineage,
        resources,
        history,
        history_summary,
        autoscale,
        spend,
        spend_months,
        alerts,
        outputs,
        standing,
        repairs,
        health,
    } = state;
    StoredForm {
        format_version: *format_version,
        serial: *serial,
        lineage,
        resources: resources.iter().map(|(k, r)| (k, super::stored::ResourceOut(r))).collect(),
        history: history.iter().collect(),
        history_summary: history_summary.as_ref(),
        autoscale: autoscale.iter().collect(),
        spend: (!spend.is_empty()).then_some(super::stored::LedgerOut(spend)),
        spend_months: spend_months.iter().collect(),
        alerts: alerts.iter().collect(),
        outputs: outputs.iter().collect(),
        standing: standing.iter().collect(),
        repairs: repairs.iter().collect(),
        health: health.iter().collect(),
    }
}

/// A reader that hands out one byte per read: block boundaries everywhere.
struct Trickle<'a>(&'a [u8]);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some((first, rest)) = self.0.split_first() else { return Ok(0) };
        buf[0] = *first;
        self.0 = rest;
        Ok(1)
    }
}

/// The quick header scan before a write never accepts a file `serde_json` refuses, and
/// when it accepts one, its header is the one `serde_json` reads: a state file as gpuplan
/// writes it, every prefix of it, and every byte of it replaced by bytes that matter to
/// JSON, read whole and a byte at a time. Files it is unsure of go to `serde_json`.
#[test]
fn the_quick_header_scan_agrees_with_serde_or_leaves_the_file_to_it() {
    use super::scan::{Scan, scan};
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let lock = b.lock("test", NO_WAIT).unwrap();
    let mut state = State::new("00000000-0000-4000-8000-000000000000".into());
    let mut n = node("gpu_pool.a", "i-1");
    n.tags.insert("note", "say \"hi\" \\ now\n\u{1}");
    state.resources.insert("gpu_pool.a".into(), resource(serde_json::json!({"n": [1, -2.5e3, true, null]}), vec![n]));
    state.history.push(HistoryEntry { at: "t".into(), event: "apply".into(), detail: "1 of 1".into() });
    b.write(&lock, &mut state).unwrap();
    let bytes = fs::read(b.path()).unwrap();
    let agree = |bytes: &[u8]| {
        let scanned = scan(bytes);
        assert_eq!(scan(Trickle(bytes)), scanned, "{}", String::from_utf8_lossy(bytes));
        if let Scan::Sure(f) = scanned {
            let (found, result) = local::header_by_serde(bytes);
            assert!(result.is_ok(), "accepted what serde refuses: {result:?}\n{}", String::from_utf8_lossy(bytes));
            let h = found.expect("serde found the header");
            assert_eq!((f.format_version, f.serial, f.lineage), (h.format_version, h.serial, h.lineage));
        }
    };
    assert!(matches!(scan(&bytes[..]), Scan::Sure(ref f) if f.serial == 1), "a state gpuplan wrote is scanned");
    for cut in 0..bytes.len() {
        agree(&bytes[..cut]);
    }
    for at in 0..bytes.len() {
        for b in [b'"', b'\\', b'{', b'}', b']', b',', b':', b'0', b'-', b'e', b'x', b' ', 0, 0xc3] {
            let mut m = bytes.clone();
            m[at] = b;
            agree(&m);
        }
    }
    // A header key given twice (serde keeps the last) and non-ASCII text go to serde.
    assert_eq!(scan(&br#"{"format_version":1,"serial":1,"lineage":"a","serial":2}"#[..]), Scan::Unsure);
    assert_eq!(scan("{\"format_version\":1,\"serial\":1,\"lineage\":\"é\"}".as_bytes()), Scan::Unsure);
}

/// A state the quick scan leaves to `serde_json` (non-ASCII text) is still written over
/// after the same checks: the next write succeeds and a stale copy is still refused.
#[test]
fn a_state_the_quick_scan_is_unsure_of_is_checked_by_serde_before_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let b = backend(&dir);
    let lock = b.lock("test", NO_WAIT).unwrap();
    let mut state = State::new("00000000-0000-4000-8000-000000000000".into());
    state.history.push(HistoryEntry { at: "t".into(), event: "apply".into(), detail: "équipe ML".into() });
    b.write(&lock, &mut state).unwrap();
    let mut stale = state.clone();
    b.write(&lock, &mut state).unwrap();
    assert_eq!(state.serial, 2);
    assert!(matches!(b.write(&lock, &mut stale), Err(StateError::Stale { .. })));
}
