//! Tests for the state that stays small (docs/design/state-and-locks.md): tags rebuilt on
//! read, the history counted past its limit, closed months of the ledger folded with
//! every month-to-date figure unchanged.

use super::model::{HISTORY_LIMIT, HistoryEntry, ResourceState, SpendEntry, State};
use super::{JournalEntry, LocalBackend, apply_entry, compact, spend};
use crate::model::{Capacity, Node, NodeState, Tags};

fn node(id: &str, tags: &[(&str, &str)]) -> Node {
    Node {
        provider: None,
        id: id.into(),
        pool: "gpu_pool.a".parse().unwrap(),
        instance_type: "g6.xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::Spot,
        state: NodeState::Running,
        image: None,
        tags: tags.iter().copied().collect::<Tags>(),
    }
}

fn pool(nodes: Vec<Node>) -> ResourceState {
    ResourceState {
        kind: "gpu_pool".into(),
        provider: Some("sim".into()),
        provider_kind: Some("sim".into()),
        region: Some("us-east-1".into()),
        config: serde_json::json!({"gpu": "L4"}).into(),
        sensitive: Vec::new(),
        dependencies: vec![],
        nodes,
        job: None,
        fallback: None,
        placement: None,
        reservation: None,
    }
}

#[test]
fn derived_tags_are_left_out_of_the_file_and_rebuilt_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::new(dir.path().join("default.json"));
    let mut state = State::new("lin-1".into());
    let owned = [
        ("gpuplan:address", "gpu_pool.a"),
        ("gpuplan:lineage", "lin-1"),
        ("gpuplan:managed", "true"),
        ("gpuplan:provider", "sim"),
        ("team", "ml"),
    ];
    // Lacks `gpuplan:provider` and carries another lineage: both must come back as they were.
    let odd = [("gpuplan:address", "gpu_pool.a"), ("gpuplan:lineage", "lin-0"), ("gpuplan:managed", "true")];
    state.resources.insert("gpu_pool.a".into(), pool(vec![node("i-1", &owned), node("i-2", &odd), node("i-3", &[])]));
    let lock = backend.lock("test", std::time::Duration::ZERO).unwrap();
    backend.write(&lock, &mut state).unwrap();

    let text = std::fs::read_to_string(dir.path().join("default.json")).unwrap();
    assert_eq!(text.matches("lin-1").count(), 1, "only the state's own lineage: {text}");
    assert!(!text.contains("\"gpuplan:managed\""), "{text}");
    assert!(text.contains("\"gpuplan:lacks\": \"gpuplan:provider\""), "{text}");
    assert!(text.contains("\"gpuplan:lineage\": \"lin-0\""), "{text}");
    let read = backend.read().unwrap().unwrap();
    assert_eq!(read.resources, state.resources);
    assert_eq!(read.format_version, super::model::FORMAT_VERSION);
}

fn history(at: &str) -> JournalEntry {
    let event = if at.ends_with("0Z") { "reconcile" } else { "apply" };
    JournalEntry::History { entry: HistoryEntry { at: at.into(), event: event.into(), detail: String::new() } }
}

#[test]
fn history_keeps_the_newest_entries_and_counts_the_older_ones() {
    let mut state = State::new("l".into());
    let times: Vec<String> =
        (0..HISTORY_LIMIT + 150).map(|i| format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60)).collect();
    for at in &times {
        apply_entry(&mut state, &history(at));
    }
    assert_eq!(state.history.len(), HISTORY_LIMIT);
    assert_eq!(state.history[0].at, times[150]);
    let summary = state.history_summary.clone().expect("a summary");
    assert_eq!((summary.from.as_str(), summary.to.as_str()), (times[0].as_str(), times[149].as_str()));
    assert_eq!(summary.events.values().sum::<u64>(), 150);
    assert_eq!(summary.events["reconcile"], 15, "every tenth second ends in 0");
}

fn at(s: &str) -> u64 {
    humantime::parse_rfc3339(s).unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

fn line(pool: &str, job: Option<&str>, usd: f64, start: &str, end: Option<&str>) -> SpendEntry {
    SpendEntry {
        pool: pool.into(),
        provider: "sim".into(),
        job: job.map(str::to_string),
        instance_type: "g6.xlarge".into(),
        capacity: Capacity::Spot,
        usd_per_hour: usd,
        price_source: "catalog".into(),
        start_ms: at(start),
        end_ms: end.map(at),
    }
}

/// A year's ledger: a node a day, each reclaimed after 20 hours, one spanning a month's
/// end, one still open, and a job run on a closed node of January.
fn year_ledger() -> State {
    let mut s = State::new("l".into());
    let day = 86_400_000;
    for d in 0..300u64 {
        let start = at("2026-01-01T00:00:00Z") + d * day;
        let mut l = line("gpu_pool.a", None, 0.5 + (d % 7) as f64 / 10.0, "2026-01-01T00:00:00Z", None);
        (l.start_ms, l.end_ms) = (start, Some(start + 20 * 3_600_000));
        s.spend.insert(format!("i-{d:03}"), l);
    }
    s.spend.insert(
        "i-span".into(),
        line("gpu_pool.b", Some("job.t"), 2.0, "2026-09-30T12:00:00Z", Some("2026-10-02T00:00:00Z")),
    );
    s.spend.insert("i-open".into(), line("gpu_pool.b", None, 1.0, "2026-10-20T00:00:00Z", None));
    let record = serde_json::json!({"runs": [{"replica": 0, "attempt": 1, "id": "j-1", "provider": "sim",
        "region": "us-east-1", "node_id": "i-003", "capacity": "spot", "gpus": 1, "status": "succeeded",
        "launched_at": "2026-01-04T01:00:00Z", "finished_at": "2026-01-04T02:00:00Z"}]});
    let mut job = pool(vec![]);
    job.kind = "job".into();
    job.job = Some(Box::new(serde_json::from_value(record).unwrap()));
    s.resources.insert("job.t".into(), job);
    s
}

#[test]
fn closed_months_fold_into_totals_and_every_figure_stays_the_same() {
    let before = year_ledger();
    let mut after = before.clone();
    compact::fold_spend(&mut after);
    // Left: October's 27 lines (the ledger's newest month), the line across September's
    // end, the open one and the job's.
    assert_eq!(after.spend.len(), 27 + 3, "{:?}", after.spend.keys().collect::<Vec<_>>());
    assert!(after.spend.contains_key("i-003"), "a job run's node line is kept (its cost so far reads it)");
    assert!(after.spend.contains_key("i-open") && after.spend.contains_key("i-span"));

    let quotas = |p: &str| if p == "gpu_pool.a" { vec!["quota.q".to_string()] } else { vec![] };
    for now in ["2026-10-27T10:00:00Z", "2026-10-31T23:59:59Z", "2026-11-02T00:00:00Z"] {
        let a = spend::month_to_date(&before, |_| at(now), quotas, None);
        let b = spend::month_to_date(&after, |_| at(now), quotas, None);
        assert_eq!(a, b, "at {now}");
    }
    // What the folded lines accrued is in the monthly totals, to the cent.
    let folded: f64 = before
        .spend
        .iter()
        .filter(|(id, _)| !after.spend.contains_key(*id))
        .map(|(_, l)| (l.end_ms.unwrap() - l.start_ms) as f64 / 3_600_000.0 * l.usd_per_hour)
        .sum();
    let totals: f64 = after.spend_months.values().map(|m| m.usd).sum();
    assert!((folded - totals).abs() < 1e-6, "{folded} vs {totals}");
    let jan = &after.spend_months["2026-01"];
    assert_eq!(jan.lines, 30, "31 January lines less the job's");
    assert!((jan.by_pool["gpu_pool.a"] - jan.usd).abs() < 1e-9);

    // Folding again changes nothing; the state is written and read back with its totals.
    let mut again = after.clone();
    compact::fold_spend(&mut again);
    assert_eq!(again, after);
    let text = serde_json::to_string(&after).unwrap();
    assert_eq!(serde_json::from_str::<State>(&text).unwrap(), after);
}

/// A pool of 100 nodes alike but for a few, and a ledger of lines alike but for a few.
fn packable() -> State {
    let mut state = State::new("lin-1".into());
    let mut nodes: Vec<Node> = (0..100).map(|i| node(&format!("i-{i:03}"), &[("team", "ml")])).collect();
    nodes[1].zone = "us-east-1b".into();
    nodes[2].image = Some("ami-1".into());
    nodes[3].tags = Tags::new();
    nodes[4].provider = Some("other".into());
    (nodes[5].state, nodes[5].capacity) = (NodeState::Reclaimed, Capacity::OnDemand);
    (nodes[6].instance_type, nodes[6].region) = ("g6.2xlarge".into(), "us-west-2".into());
    // The image most share, and one node without it: written as `"image": null`.
    let mut imaged: Vec<Node> = (0..3).map(|i| node(&format!("i-c{i}"), &[])).collect();
    for n in &mut imaged[1..] {
        n.image = Some("ami-2".into());
    }
    state.resources.insert("gpu_pool.a".into(), pool(nodes));
    state.resources.insert("gpu_pool.c".into(), pool(imaged));
    state.resources.insert("gpu_pool.d".into(), pool(vec![node("i-d0", &[])]));
    for i in 0..100 {
        let end = (i % 10 == 0).then_some("2026-03-02T00:00:00Z");
        let job = (i == 7).then_some("job.t");
        let usd = if i == 8 { 0.7 } else { 0.5 };
        state.spend.insert(format!("i-{i:03}"), line("gpu_pool.a", job, usd, "2026-03-01T00:00:00Z", end));
    }
    state
}

#[test]
fn nodes_and_the_ledger_are_written_packed_and_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::new(dir.path().join("default.json"));
    let mut state = packable();
    let lock = backend.lock("test", std::time::Duration::ZERO).unwrap();
    backend.write(&lock, &mut state).unwrap();
    let text = std::fs::read_to_string(dir.path().join("default.json")).unwrap();
    let file: serde_json::Value = serde_json::from_str(&text).unwrap();

    let a = &file["resources"]["gpu_pool.a"]["nodes"];
    assert_eq!(a["common"]["zone"], "us-east-1a", "{a:#}");
    assert_eq!(a["common"]["tags"]["team"], "ml", "{a:#}");
    let each = a["each"].as_array().unwrap();
    assert_eq!(each.len(), 100);
    assert_eq!(each.iter().filter(|n| n.is_string()).count(), 94, "a node like the rest is its id: {a:#}");
    assert_eq!(each[1], serde_json::json!({"id": "i-001", "zone": "us-east-1b"}));
    assert!(each[3]["tags"].as_object().is_some_and(|t| t.keys().all(|k| k.starts_with("gpuplan:"))), "{a:#}");
    let c = &file["resources"]["gpu_pool.c"]["nodes"];
    assert_eq!((&c["common"]["image"], &c["each"][0]["image"]), (&"ami-2".into(), &serde_json::Value::Null), "{c:#}");
    assert!(file["resources"]["gpu_pool.d"]["nodes"].is_array(), "one node stays a list");

    let groups = file["spend"].as_array().expect("the ledger as groups");
    assert_eq!(groups.len(), 3, "one price, another price, a job: {groups:#?}");
    let open = groups.iter().find(|g| g["usd_per_hour"] == 0.5 && g["job"].is_null()).unwrap();
    assert_eq!(open["lines"]["i-001"], at("2026-03-01T00:00:00Z"), "an open line is its launch");
    assert_eq!(open["lines"]["i-010"]["end_ms"], at("2026-03-02T00:00:00Z"));

    let read = backend.read().unwrap().unwrap();
    assert_eq!(read.resources, state.resources);
    assert_eq!(read.spend, state.spend);
    assert!(text.len() < 100 * 150, "{} bytes for 100 nodes and their ledger lines", text.len());
}

#[test]
fn a_ledger_line_in_two_groups_is_a_corrupt_state_at_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::new(dir.path().join("default.json"));
    let mut state = packable();
    let lock = backend.lock("test", std::time::Duration::ZERO).unwrap();
    backend.write(&lock, &mut state).unwrap();
    drop(lock);
    let path = dir.path().join("default.json");
    let text = std::fs::read_to_string(&path).unwrap();
    // The price-0.7 group's one line, i-008, renamed to a line of the 0.5 group.
    let ledger = text.find("\"spend\"").unwrap();
    let broken = format!("{}{}", &text[..ledger], text[ledger..].replacen("\"i-008\"", "\"i-001\"", 1));
    assert_ne!(broken, text);
    std::fs::write(&path, broken).unwrap();
    let e = backend.read().unwrap_err().to_string();
    assert!(e.contains("ledger line `i-001` is in two groups"), "{e}");
}
