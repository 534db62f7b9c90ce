//! An import that fails half way: every instance is imported (tagged and recorded) or
//! untouched, never recorded without its tags.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::*;
use crate::addr::Address;
use crate::plan::adopt::{AdoptAction, Adoption};
use crate::providers::{AdoptionPort, Capacity, ErrorClass, NodeState, ProviderError, Tags};
use crate::spec::model::ProviderKind;
use crate::state::{LocalBackend, ResourceState, State};

/// Tags every batch until it meets `refuse`; records which ids it tagged.
struct Tagger {
    refuse: String,
    tagged: Mutex<Vec<String>>,
}

fn never<T>() -> Result<T, ProviderError> {
    Err(ProviderError::new(ErrorClass::Fatal, "Unused", "not called by adoptions"))
}

/// Adoption alone: an import asks nothing else.
#[async_trait]
impl Provider for Tagger {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Sim
    }
    fn adoption(&self) -> Option<&dyn AdoptionPort> {
        Some(self)
    }
}

#[async_trait]
impl AdoptionPort for Tagger {
    async fn describe_nodes(&self, _: &str, _: &[String]) -> Result<Vec<Node>, ProviderError> {
        never()
    }
    async fn list_unmanaged(&self, _: &str, _: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        never()
    }
    async fn tag_nodes(&self, _: &str, ids: &[String], _: &Tags, _: &[String]) -> Result<(), ProviderError> {
        if ids.contains(&self.refuse) {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "Refused",
                format!("{} cannot be tagged", self.refuse),
            ));
        }
        self.tagged.lock().unwrap().extend(ids.iter().cloned());
        Ok(())
    }
}

fn node(i: usize) -> Node {
    Node {
        provider: None,
        id: format!("i-{i:04}"),
        pool: "gpu_pool.legacy".parse().unwrap(),
        instance_type: "p4d.24xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::OnDemand,
        state: NodeState::Running,
        image: None,
        tags: Tags::new(),
    }
}

#[tokio::test]
async fn an_import_failing_half_way_records_exactly_what_it_tagged() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    let backend = LocalBackend::new(dir.path().join("state").join("default.json"));
    let lock = backend.lock("apply", Duration::ZERO).unwrap();
    let mut state = State::new("00000000-0000-4000-8000-000000000000".into());
    backend.write(&lock, &mut state).unwrap();
    let (recorder, handle) = Recorder::start(backend.open_journal(&lock, &state).unwrap());

    let nodes: Vec<Node> = (0..150).map(node).collect();
    let tagger = Arc::new(Tagger { refuse: nodes[120].id.clone(), tagged: Mutex::new(vec![]) });
    let providers: ProviderSet = BTreeMap::from([("sim".to_string(), tagger.clone() as Arc<dyn Provider>)]);
    let address: Address = "gpu_pool.legacy".parse().unwrap();
    let resource = ResourceState {
        kind: "gpu_pool".into(),
        provider: Some("sim".into()),
        provider_kind: Some("sim".into()),
        region: Some("us-east-1".into()),
        config: Default::default(),
        sensitive: Vec::new(),
        dependencies: vec![],
        nodes: vec![],
        job: None,
        fallback: None,
        placement: None,
        reservation: None,
    };
    let adoption = Adoption {
        action: AdoptAction::Import,
        address: address.clone(),
        from: None,
        provider: Some("sim".into()),
        region: Some("us-east-1".into()),
        nodes,
        set_tags: [("gpuplan:managed", "true")].into_iter().collect(),
        remove_tags: vec![],
        resource: Some(resource),
    };
    let (outcomes, counts) = run(&[adoption], &providers, &recorder, &Cancel::default()).await;
    drop(recorder);
    let (journal, error) = handle.finish().unwrap();
    assert_eq!(error, None);
    backend.compact(&lock, journal, &mut state).unwrap();

    assert!(matches!(&outcomes[0].status, Status::Failed(m) if m.contains("cannot be tagged")), "{outcomes:?}");
    assert_eq!(counts.imported, 100, "the first batch of 100 went through");
    let recorded: Vec<String> = state.resources["gpu_pool.legacy"].nodes.iter().map(|n| n.id.clone()).collect();
    assert_eq!(recorded, *tagger.tagged.lock().unwrap(), "recorded = tagged, nothing more");
    assert_eq!(recorded.len(), 100);
    assert_eq!(state.spend.len(), 100, "spend lines only for what was imported");
}

/// Cancels the apply during its first tag call: the batch in flight finishes and is
/// recorded, no other batch starts.
struct CancellingTagger {
    cancel: Arc<Cancel>,
    tagged: Mutex<Vec<String>>,
}

/// Adoption alone: an import asks nothing else.
#[async_trait]
impl Provider for CancellingTagger {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Sim
    }
    fn adoption(&self) -> Option<&dyn AdoptionPort> {
        Some(self)
    }
}

#[async_trait]
impl AdoptionPort for CancellingTagger {
    async fn describe_nodes(&self, _: &str, _: &[String]) -> Result<Vec<Node>, ProviderError> {
        never()
    }
    async fn list_unmanaged(&self, _: &str, _: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        never()
    }
    async fn tag_nodes(&self, _: &str, ids: &[String], _: &Tags, _: &[String]) -> Result<(), ProviderError> {
        self.cancel.cancel_because("SIGTERM received");
        self.tagged.lock().unwrap().extend(ids.iter().cloned());
        Ok(())
    }
}

#[tokio::test]
async fn a_cancelled_import_records_the_batch_in_flight_and_starts_no_other() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    let backend = LocalBackend::new(dir.path().join("state").join("default.json"));
    let lock = backend.lock("apply", Duration::ZERO).unwrap();
    let mut state = State::new("00000000-0000-4000-8000-000000000000".into());
    backend.write(&lock, &mut state).unwrap();
    let (recorder, handle) = Recorder::start(backend.open_journal(&lock, &state).unwrap());

    let cancel = Arc::new(Cancel::default());
    let tagger = Arc::new(CancellingTagger { cancel: cancel.clone(), tagged: Mutex::new(vec![]) });
    let providers: ProviderSet = BTreeMap::from([("sim".to_string(), tagger.clone() as Arc<dyn Provider>)]);
    let address: Address = "gpu_pool.legacy".parse().unwrap();
    let adoption = |address: Address, nodes: Vec<Node>| Adoption {
        action: AdoptAction::Import,
        address,
        from: None,
        provider: Some("sim".into()),
        region: Some("us-east-1".into()),
        nodes,
        set_tags: [("gpuplan:managed", "true")].into_iter().collect(),
        remove_tags: vec![],
        resource: None,
    };
    let other: Address = "gpu_pool.other".parse().unwrap();
    let adoptions = [adoption(address, (0..250).map(node).collect()), adoption(other, (300..310).map(node).collect())];
    let (outcomes, counts) = run(&adoptions, &providers, &recorder, &cancel).await;
    drop(recorder);
    let (journal, error) = handle.finish().unwrap();
    assert_eq!(error, None);
    backend.compact(&lock, journal, &mut state).unwrap();

    assert_eq!(outcomes.len(), 1, "the next adoption never starts: {outcomes:?}");
    match &outcomes[0].status {
        Status::Skipped(m) => {
            assert!(m.contains("150 of 250 instance(s) not imported") && m.contains("SIGTERM received"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(counts.imported, 100);
    assert_eq!(tagger.tagged.lock().unwrap().len(), 100, "one batch tagged, then nothing");
    assert_eq!(state.resources["gpu_pool.legacy"].nodes.len(), 100, "the batch in flight is recorded");
}
