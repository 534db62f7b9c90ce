//! The remote backend's write path against a store that fails on demand ([`Flaky`]):
//! progress survives transient failures, stops only on a conflict or a store that keeps
//! failing, and a final state the store will not take is kept in `errored.json`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::remote::{ErroredCopy, LockMode, RemoteBackend, Timing};
use super::test_store::Flaky;
use super::*;

const KEY: &str = "fleets/prod.json";

/// Writes due at once, retried without waiting: the tests count attempts, not seconds.
fn fast() -> Timing {
    Timing {
        flush_every: Duration::ZERO,
        backoff_first: Duration::ZERO,
        backoff_max: Duration::ZERO,
        flush_attempts: 3,
        final_attempts: 3,
    }
}

fn remote(store: &Arc<Flaky>) -> RemoteBackend {
    let store: Arc<dyn ObjectStore> = store.clone();
    RemoteBackend::over(store, LockMode::Conditional, false, KEY).unwrap().with_timing(fast())
}

fn pool(name: &str) -> JournalEntry {
    let resource = ResourceState {
        kind: "gpu_pool".into(),
        provider: Some("sim".into()),
        provider_kind: Some("sim".into()),
        region: Some("us-east-1".into()),
        config: serde_json::json!({"name": name}).into(),
        sensitive: Vec::new(),
        dependencies: vec![],
        nodes: vec![],
        job: None,
        fallback: None,
        placement: None,
        reservation: None,
    };
    JournalEntry::PutResource { address: format!("gpu_pool.{name}"), resource }
}

/// A backend with a state written once (serial 1), its lock, and a journal on it.
fn started(store: &Arc<Flaky>) -> (Backend, StateLock, Journal) {
    let backend = Backend::Remote(remote(store));
    let lock = backend.lock("apply", Duration::ZERO).unwrap();
    let mut state = State::new("lineage-1".into());
    backend.write(&lock, &mut state).unwrap();
    let journal = backend.open_journal(&lock, &state).unwrap();
    (backend, lock, journal)
}

fn stored(store: &Arc<Flaky>) -> State {
    let bytes = stored_bytes(store);
    super::local::parse_state(std::path::Path::new(KEY), std::path::Path::new(KEY), &bytes, &Default::default())
        .unwrap()
}

/// The state object as the store holds it.
fn stored_bytes(store: &Arc<Flaky>) -> bytes::Bytes {
    let store = store.clone();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async move { store.get(&object_store::path::Path::from(KEY)).await.unwrap().bytes().await })
        .unwrap()
}

fn put_object(store: &Arc<Flaky>, body: Vec<u8>) {
    let store = store.clone();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async move { store.put(&object_store::path::Path::from(KEY), PutPayload::from(body)).await })
        .unwrap();
}

#[test]
fn remote_state_is_written_compressed_in_an_envelope_an_old_reader_refuses() {
    let store = Flaky::new();
    let backend = Backend::Remote(remote(&store));
    let lock = backend.lock("apply", Duration::ZERO).unwrap();
    let mut state = State::new("lineage-1".into());
    for i in 0..200 {
        let JournalEntry::PutResource { address, mut resource } = pool(&format!("p{i:03}")) else { unreachable!() };
        resource.nodes = (0..10)
            .map(|n| crate::model::Node {
                provider: None,
                id: format!("i-{i:03}{n:02}"),
                pool: address.parse().unwrap(),
                instance_type: "p5.48xlarge".into(),
                region: "us-east-1".into(),
                zone: "us-east-1a".into(),
                capacity: crate::model::Capacity::OnDemand,
                state: crate::model::NodeState::Running,
                image: None,
                tags: [("gpuplan:managed", "true"), ("gpuplan:lineage", "lineage-1"), ("team", "ml")]
                    .into_iter()
                    .collect(),
            })
            .collect();
        state.resources.insert(address, resource);
    }
    backend.write(&lock, &mut state).unwrap();
    let raw = stored_bytes(&store);
    let plain = serde_json::to_vec_pretty(&state).unwrap();
    assert!(raw.starts_with(br#"{"encoding":"gzip+base64","format_version":3,"serial":1,"lineage":"lineage-1","#));
    assert!(raw.len() * 10 < plain.len(), "{} bytes against {} plain", raw.len(), plain.len());
    // A gpuplan that reads only formats 1 and 2 looks at `format_version` first: 3 is "newer".
    let head: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(head["format_version"], 3);
    let read = backend.read().unwrap().unwrap();
    assert_eq!(read.resources, state.resources);
    assert_eq!(read.serial, 1);

    // An encoding this gpuplan does not know is refused by name, never read as empty.
    let other = String::from_utf8(raw.to_vec()).unwrap().replacen("gzip+base64", "zstd+base64", 1);
    put_object(&store, other.into_bytes());
    let err = backend.read().unwrap_err().to_string();
    assert!(err.contains("encoded as `zstd+base64`, which this gpuplan does not read"), "{err}");
}

#[test]
fn transient_write_failures_do_not_stop_remote_progress() {
    let store = Flaky::new();
    let (_backend, _lock, mut journal) = started(&store);
    journal.append(&[pool("a")]).unwrap();
    assert!(stored(&store).resources.contains_key("gpu_pool.a"));

    // Two failed writes in a row (under the bound of 3): neither is the caller's error...
    store.fail_next(2);
    journal.append(&[pool("b")]).expect("a failed progress write is tried again later");
    journal.append(&[pool("c")]).expect("and again");
    assert!(journal.stopped().is_none());
    // ...and the next write carries everything.
    journal.append(&[pool("d")]).unwrap();
    let state = stored(&store);
    for p in ["a", "b", "c", "d"] {
        assert!(state.resources.contains_key(&format!("gpu_pool.{p}")), "gpu_pool.{p} was written");
    }
}

#[test]
fn a_store_that_keeps_failing_stops_progress_after_bounded_tries_but_entries_still_fold() {
    let store = Flaky::new();
    let (_backend, _lock, mut journal) = started(&store);
    store.fail_next(usize::MAX);
    journal.append(&[pool("a")]).unwrap();
    journal.append(&[pool("b")]).unwrap();
    let third = journal.append(&[pool("c")]);
    assert!(third.is_err(), "the third failure in a row gives up on progress writes");
    let attempts = store.writes.load(Ordering::SeqCst);
    match journal.append(&[pool("d")]) {
        Err(StateError::ProgressStopped { cause, .. }) => assert!(cause.contains("injected"), "{cause}"),
        other => panic!("expected ProgressStopped, got {other:?}"),
    }
    assert_eq!(store.writes.load(Ordering::SeqCst), attempts, "a stopped writer does not call the store");
    let folded = journal.into_state();
    assert_eq!(folded.resources.len(), 4, "every entry is folded in memory for the final write");
}

#[test]
fn a_conflict_stops_progress_at_once() {
    let store = Flaky::new();
    let (_backend, _lock, mut journal) = started(&store);
    // Someone else writes the state (a broken lock's new holder).
    let other = remote(&store);
    let mut theirs = other.read().unwrap().unwrap();
    other.write_unchecked(&mut theirs).unwrap();
    match journal.append(&[pool("a")]) {
        Err(StateError::Stale { found_serial: 2, .. }) => {}
        other => panic!("expected Stale, got {other:?}"),
    }
    assert!(journal.stopped().is_some());
}

#[test]
fn a_write_whose_answer_was_lost_is_not_taken_for_a_conflict() {
    let store = Flaky::new();
    let (_backend, _lock, mut journal) = started(&store);
    store.lose_answers(1);
    journal.append(&[pool("a")]).unwrap();
    // The store took the write; only the answer was lost. The next write sees its own bytes.
    journal.append(&[pool("b")]).unwrap();
    assert!(journal.stopped().is_none());
    assert!(stored(&store).resources.contains_key("gpu_pool.b"));
}

#[test]
fn the_final_write_is_retried_after_a_transient_failure() {
    let store = Flaky::new();
    let (backend, lock, mut journal) = started(&store);
    journal.append(&[pool("a")]).unwrap();
    store.fail_next(2);
    let mut state = State::new("unused".into());
    backend.compact(&lock, journal, &mut state).expect("the third try goes through");
    assert!(stored(&store).resources.contains_key("gpu_pool.a"));
}

#[test]
fn a_final_state_the_store_will_not_take_is_kept_in_errored_json_with_the_push_command() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Flaky::new();
    let copy =
        |dir: &std::path::Path| ErroredCopy { dir: dir.to_path_buf(), push_command: "gpuplan state push".into() };
    let backend = Backend::Remote(remote(&store).with_errored_copy(copy(tmp.path())));
    let lock = backend.lock("apply", Duration::ZERO).unwrap();
    let mut state = State::new("lineage-1".into());
    backend.write(&lock, &mut state).unwrap();
    let mut journal = backend.open_journal(&lock, &state).unwrap();
    journal.append(&[pool("a"), pool("b")]).unwrap();
    store.fail_next(usize::MAX);
    journal.append(&[pool("c")]).unwrap();

    let err = backend.compact(&lock, journal, &mut state).unwrap_err();
    let saved = tmp.path().join("errored.json");
    match &err {
        StateError::Errored { command, saved: at, .. } => {
            assert_eq!(command, "gpuplan state push errored.json");
            assert_eq!(at, &saved);
        }
        other => panic!("expected Errored, got {other:?}"),
    }
    let text = format!("{err}\n{}", miette::Diagnostic::help(&err).unwrap());
    assert!(text.contains("`gpuplan state push errored.json`") && text.contains("injected"), "{text}");
    let kept: State = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    assert_eq!(kept.lineage, "lineage-1");
    assert_eq!(kept.resources.len(), 3, "the full state, the entries the store never saw included");

    // A second failure never overwrites a copy nobody pushed yet.
    let mut journal = backend.open_journal(&lock, &state).unwrap();
    journal.append(&[pool("d")]).unwrap();
    match backend.compact(&lock, journal, &mut state) {
        Err(StateError::Errored { command, .. }) => assert_eq!(command, "gpuplan state push errored-2.json"),
        other => panic!("expected Errored, got {other:?}"),
    }
    assert_eq!(serde_json::from_slice::<State>(&std::fs::read(&saved).unwrap()).unwrap().resources.len(), 3);
}

#[test]
fn the_probe_refuses_a_store_that_ignores_a_wrong_version() {
    // InMemory honours versions: the probe passes.
    let store = Flaky::new();
    remote(&store).probe().unwrap();
    // A store that overwrites whatever If-Match says is refused.
    let careless: Arc<dyn ObjectStore> = Arc::new(IgnoresIfMatch(object_store::memory::InMemory::new()));
    let b = RemoteBackend::over(careless, LockMode::Cos, true, KEY).unwrap();
    let err = b.probe().unwrap_err().to_string();
    assert!(err.contains("wrong version"), "{err}");
    // With `lock_mode = "cos"` the probe runs before every lock, so such a store is never locked.
    assert!(b.lock("apply", Duration::ZERO).is_err());
}

/// A store that honours create-only writes but overwrites on any `Update`.
#[derive(Debug)]
struct IgnoresIfMatch(object_store::memory::InMemory);

impl std::fmt::Display for IgnoresIfMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IgnoresIfMatch")
    }
}

#[async_trait::async_trait]
impl ObjectStore for IgnoresIfMatch {
    async fn put_opts(
        &self,
        location: &object_store::path::Path,
        payload: PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        let mode = match opts.mode {
            object_store::PutMode::Update(_) => object_store::PutMode::Overwrite,
            m => m,
        };
        self.0.put_opts(location, payload, object_store::PutOptions::from(mode)).await
    }
    async fn put_multipart_opts(
        &self,
        location: &object_store::path::Path,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.0.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &object_store::path::Path,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        self.0.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>> {
        self.0.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.0.list(prefix)
    }
    async fn list_with_delimiter(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> object_store::Result<object_store::ListResult> {
        self.0.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &object_store::path::Path,
        to: &object_store::path::Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.0.copy_opts(from, to, options).await
    }
}

/// A 1 s lock lifetime renewed every 200 ms (trusted for 2/3 s after each renewal).
fn quick() -> super::lock::LockTiming {
    super::lock::LockTiming { ttl: Duration::from_secs(1), renew: Duration::from_millis(200) }
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !ok() {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Expiry is judged as the Lease judges it: a waiter whose wall clock runs 40 s fast would
/// find the holder's `expires` long past, yet over three lifetimes it never takes the lock
/// from a holder that keeps renewing it (it never sees one version for a TTL).
#[test]
fn a_waiter_whose_wall_clock_runs_40_s_fast_never_takes_a_live_lock() {
    let store = Flaky::new();
    let holder = remote(&store).with_lock_timing(quick());
    let lock = holder.lock("apply", Duration::ZERO).unwrap();
    let fast = || std::time::SystemTime::now() + Duration::from_secs(40);
    let waiter = remote(&store).with_lock_timing(quick()).with_wall_clock(fast);
    match waiter.lock("plan", Duration::from_secs(3)) {
        Err(StateError::Locked { holder: Some(h), .. }) => assert_eq!(h.id, lock.info.id),
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(lock.fence().is_held(), "the holder still holds it: {:?}", lock.fence());
    assert_eq!(holder.lock_info().unwrap().map(|i| i.id), Some(lock.info.id.clone()));
}

/// A lock nobody renews is taken over once the waiter has seen it unchanged for the TTL on
/// its own clock, whatever its `expires` says (here hours ahead: its writer's clock ran
/// slow), and not before.
#[test]
fn an_abandoned_lock_is_taken_over_after_a_ttl_of_seeing_it_unchanged() {
    let store = Flaky::new();
    let mut dead = LockInfo::new("apply");
    dead.extend(std::time::SystemTime::now() + Duration::from_secs(3 * 3600), Duration::from_secs(1));
    let body = serde_json::to_vec(&dead).unwrap();
    let s = store.clone();
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async move {
        s.put(&object_store::path::Path::from(format!("{KEY}.lock")), body.into()).await.unwrap();
    });
    let waiter = remote(&store).with_lock_timing(quick());
    let first_seen = std::time::Instant::now();
    assert!(matches!(waiter.lock("plan", Duration::ZERO), Err(StateError::Locked { .. })), "not before a TTL");
    let lock = waiter.lock("apply", Duration::from_secs(5)).expect("taken over");
    assert!(first_seen.elapsed() >= Duration::from_secs(1), "taken over after {:?}", first_seen.elapsed());
    assert_eq!(lock.stale.as_ref().map(|s| s.id.as_str()), Some(dead.id.as_str()));
    assert_eq!(waiter.lock_info().unwrap().map(|i| i.id), Some(lock.info.id.clone()));
}

/// A holder cut off from its lock (its renewals fail) says so, counts the failures, and
/// writes nothing once its last renewal is older than it may trust (the state object
/// would still take the write); once it reaches the store again after another process
/// took over, the lock is lost for good, naming the new holder.
#[test]
fn a_holder_that_cannot_renew_writes_nothing_more_and_learns_who_took_over() {
    let store = Flaky::new();
    let backend = Backend::Remote(remote(&store).with_lock_timing(quick()));
    let lock = backend.lock("apply", Duration::ZERO).unwrap();
    let mut state = State::new("lineage-1".into());
    backend.write(&lock, &mut state).unwrap();
    let mut journal = backend.open_journal(&lock, &state).unwrap();
    journal.append(&[pool("a")]).unwrap();
    assert!(stored(&store).resources.contains_key("gpu_pool.a"));

    let failures = super::lock::renew_failures();
    store.cut_off(Some(&lock.info.id));
    wait_until("the fence lapses", || !lock.fence().is_held());
    assert!(super::lock::renew_failures() > failures, "failed renewals are counted");
    let writes = store.writes.load(Ordering::SeqCst);
    journal.append(&[pool("b")]).expect("not an error yet: a renewal may prove the lock again");
    assert_eq!(store.writes.load(Ordering::SeqCst), writes, "no progress write while the lock cannot be proven");
    assert!(!stored(&store).resources.contains_key("gpu_pool.b"));
    match backend.write(&lock, &mut state) {
        Err(StateError::Fenced { broken }) => {
            assert!(!broken.lost && broken.failure.as_deref().is_some_and(|f| f.contains("injected")), "{broken:?}")
        }
        other => panic!("expected Fenced, got {other:?}"),
    }

    let other = Backend::Remote(remote(&store).with_lock_timing(quick()));
    let theirs = other.lock("apply", Duration::from_secs(5)).expect("taken over after a TTL unchanged");
    assert_eq!(theirs.stale.as_ref().map(|s| s.id.as_str()), Some(lock.info.id.as_str()));
    store.cut_off(None);
    wait_until("the loss is seen", || lock.fence().check().is_err_and(|b| b.lost));
    let err = backend.write(&lock, &mut state).unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("lost the state lock `mem://fleets/prod.json.lock`: it is held by `gpuplan apply`"),
        "{text}"
    );
    assert!(text.contains(&theirs.info.id), "{text}");
    drop(lock); // a lost lock's release leaves the new holder's alone
    assert_eq!(other.lock_info().unwrap().map(|i| i.id), Some(theirs.info.id.clone()));
}
