//! The node API: round trips, ids, capacity, ownership, batching, reclaims.

use super::*;
use crate::providers::{ErrorClass, ListFilter, NodePort, NodeState, Tags};

fn filter(lineage: Option<&str>) -> ListFilter {
    ListFilter { region: "us-east-1".into(), lineage: lineage.map(String::from) }
}

#[tokio::test]
async fn create_then_list_round_trips_with_tags() {
    let (_dir, _cloud, p) = fresh(SimConfig::default());
    let made = p.create_nodes(&req("train", Capacity::Spot, 3, "t1")).await.unwrap();
    assert!(made.errors.is_empty());
    assert_eq!(made.nodes.len(), 3);
    let listed = p.list_nodes(&filter(Some(LINEAGE))).await.unwrap();
    let mut expected = made.nodes.clone();
    expected.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(listed, expected);
    let n = &listed[0];
    assert_eq!(
        (n.pool.to_string().as_str(), n.zone.as_str(), n.capacity),
        ("gpu_pool.train", "us-east-1a", Capacity::Spot)
    );
    assert_eq!(n.state, NodeState::Running);
    assert_eq!(n.tags.get(TAG_ADDRESS), Some("gpu_pool.train"));
    assert_eq!(n.image.as_deref(), Some("ami-123"));
    assert!(n.id.starts_with("i-") && n.id.len() == 19, "{}", n.id);
    // Another lineage or region sees nothing; no lineage sees every gpuplan node.
    assert!(p.list_nodes(&filter(Some("other"))).await.unwrap().is_empty());
    let west = ListFilter { region: "us-west-2".into(), lineage: None };
    assert!(p.list_nodes(&west).await.unwrap().is_empty());
    assert_eq!(p.list_nodes(&filter(None)).await.unwrap().len(), 3);
}

#[tokio::test]
async fn ids_are_deterministic_for_a_seed() {
    let ids = |seed| async move {
        let (_dir, _cloud, p) = fresh(SimConfig { seed, ..SimConfig::default() });
        let a = p.create_nodes(&req("train", Capacity::OnDemand, 2, "a")).await.unwrap();
        let b = p.create_nodes(&req("train", Capacity::Spot, 2, "b")).await.unwrap();
        a.nodes.into_iter().chain(b.nodes).map(|n| n.id).collect::<Vec<_>>()
    };
    let first = ids(7).await;
    assert_eq!(first, ids(7).await);
    assert_ne!(first, ids(8).await);
    let unique: std::collections::BTreeSet<_> = first.iter().collect();
    assert_eq!(unique.len(), 4);
}

#[tokio::test]
async fn capacity_falls_back_to_the_next_type_then_reports_partial_success() {
    let (_dir, cloud, p) = fresh(SimConfig::default());
    cloud.set_capacity("us-west-2a", Capacity::Spot, Some(2)).unwrap();
    assert_eq!(cloud.capacity("us-west-2a", Capacity::Spot), 2);
    let mut r = req("train", Capacity::Spot, 5, "cap");
    r.region = "us-west-2".into();
    r.zone = "us-west-2a".into();
    r.instance_types = vec!["p4de.24xlarge".into(), "p4d.24xlarge".into()];
    let made = p.create_nodes(&r).await.unwrap();
    let types: Vec<&str> = made.nodes.iter().map(|n| n.instance_type.as_str()).collect();
    assert_eq!(types, ["p4de.24xlarge", "p4de.24xlarge", "p4d.24xlarge", "p4d.24xlarge"]);
    assert_eq!(made.errors.len(), 1);
    let e = &made.errors[0];
    assert_eq!((e.class, e.code.as_str()), (ErrorClass::OutOfCapacity, "SimInsufficientCapacity"));
    for word in ["us-west-2a", "p4de.24xlarge", "spot", "placed 4 of 5"] {
        assert!(e.message.contains(word), "{word} missing from {}", e.message);
    }
    // On-demand capacity in the same zone is separate; other zones keep the default.
    let mut od = r.clone();
    (od.capacity, od.token, od.count) = (Capacity::OnDemand, "od".into(), 3);
    assert!(p.create_nodes(&od).await.unwrap().errors.is_empty());
    // Reclaiming frees capacity again.
    cloud.interrupt(&pool("train"), 1).unwrap();
    let mut again = r.clone();
    (again.token, again.count) = ("again".into(), 1);
    assert_eq!(p.create_nodes(&again).await.unwrap().nodes.len(), 1);
}

#[tokio::test]
async fn unknown_catalog_names_are_invalid_and_create_nothing() {
    let (_dir, cloud, p) = fresh(SimConfig::default());
    for (field, value, code) in [
        ("region", "mars-1", "SimUnknownRegion"),
        ("zone", "us-east-1z", "SimUnknownZone"),
        ("type", "p9.mega", "SimUnknownInstanceType"),
    ] {
        let mut r = req("train", Capacity::Spot, 1, field);
        match field {
            "region" => r.region = value.into(),
            "zone" => r.zone = value.into(),
            _ => r.instance_types = vec![value.into()],
        }
        let e = p.create_nodes(&r).await.unwrap_err();
        assert_eq!((e.class, e.code.as_str()), (ErrorClass::Invalid, code));
        assert!(e.message.contains(value), "{}", e.message);
    }
    // Tencent and Alibaba Cloud catalogs are served too.
    let mut ali = req("cn", Capacity::OnDemand, 1, "ali");
    (ali.region, ali.zone) = ("cn-hangzhou".into(), "cn-hangzhou-i".into());
    ali.instance_types = vec!["ecs.gn7e-c16g1.4xlarge".into()];
    assert_eq!(p.create_nodes(&ali).await.unwrap().nodes.len(), 1);
    assert_eq!(cloud.nodes().len(), 1);
}

#[tokio::test]
async fn untagged_nodes_are_never_listed_nor_terminated() {
    let (_dir, cloud, p) = fresh(SimConfig::default());
    let foreign = cloud.insert_untagged("us-east-1", "us-east-1b", "p4d.24xlarge").unwrap();
    let mine = p.create_nodes(&req("train", Capacity::OnDemand, 1, "m")).await.unwrap().nodes[0].id.clone();
    assert!(p.list_nodes(&filter(None)).await.unwrap().iter().all(|n| n.id != foreign));
    let e = p.terminate_nodes("us-east-1", &[mine.clone(), foreign.clone()]).await.unwrap_err();
    assert_eq!(e.class, ErrorClass::Invalid);
    assert!(e.message.contains(&foreign));
    // Nothing was touched, not even the managed node in the same request.
    assert!(cloud.nodes().iter().all(|n| n.state == NodeState::Running));
    // A create without the ownership tag is refused rather than leaking invisible nodes.
    let mut untagged = req("train", Capacity::OnDemand, 1, "u");
    untagged.tags = Tags::new();
    assert_eq!(p.create_nodes(&untagged).await.unwrap_err().code, "SimMissingOwnershipTag");
}

#[tokio::test]
async fn terminate_batches_of_at_most_1000_and_is_idempotent() {
    let (_dir, cloud, p) = fresh(SimConfig::default());
    let mut ids: Vec<String> = Vec::new();
    for (i, zone) in ["us-east-1a", "us-east-1b", "us-east-1c"].iter().enumerate() {
        let mut r = req("big", Capacity::OnDemand, 900, &format!("z{i}"));
        r.zone = zone.to_string();
        ids.extend(p.create_nodes(&r).await.unwrap().nodes.into_iter().map(|n| n.id));
    }
    // Paged list: 2,700 nodes come back in three pages, in id order.
    let listed = p.list_nodes(&filter(Some(LINEAGE))).await.unwrap();
    assert_eq!(listed.len(), 2_700);
    assert!(listed.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(cloud.stats().pages, 3);

    ids.push("i-doesnotexist0000".into());
    let done = p.terminate_nodes("us-east-1", &ids).await.unwrap();
    assert_eq!(done.len(), 2_701);
    assert_eq!(cloud.stats().calls.get("terminate_nodes"), Some(&3));
    assert!(cloud.nodes().iter().all(|n| n.state == NodeState::Terminated));
    // Again: already terminated counts as done.
    assert_eq!(p.terminate_nodes("us-east-1", &ids[..5]).await.unwrap().len(), 5);
}

#[tokio::test]
async fn interrupt_reclaims_only_live_spot_nodes_of_that_pool() {
    let (_dir, cloud, p) = fresh(SimConfig::default());
    let spot = p.create_nodes(&req("train", Capacity::Spot, 3, "s")).await.unwrap().nodes;
    p.create_nodes(&req("train", Capacity::OnDemand, 2, "o")).await.unwrap();
    p.create_nodes(&req("eval", Capacity::Spot, 2, "e")).await.unwrap();
    let reclaimed = cloud.interrupt(&pool("train"), 2).unwrap();
    let mut highest: Vec<String> = spot.iter().map(|n| n.id.clone()).collect();
    highest.sort();
    highest.reverse();
    assert_eq!(reclaimed, highest[..2]);
    // Asking for more than remain reclaims only what is left of that pool's spot nodes.
    assert_eq!(cloud.interrupt(&pool("train"), 10).unwrap(), highest[2..]);
    assert!(cloud.interrupt(&pool("train"), 1).unwrap().is_empty());
    for n in p.list_nodes(&filter(None)).await.unwrap() {
        let expect = if n.pool == pool("train") && n.capacity == Capacity::Spot {
            NodeState::Reclaimed
        } else {
            NodeState::Running
        };
        assert_eq!(n.state, expect, "{n:?}");
    }
}

#[tokio::test]
async fn out_of_band_termination_shows_as_terminated() {
    let (_dir, cloud, p) = fresh(SimConfig::default());
    let id = p.create_nodes(&req("train", Capacity::OnDemand, 1, "x")).await.unwrap().nodes[0].id.clone();
    cloud.terminate_out_of_band(&id).unwrap();
    assert_eq!(p.list_nodes(&filter(None)).await.unwrap()[0].state, NodeState::Terminated);
    assert!(cloud.terminate_out_of_band("i-nope").is_err());
}
