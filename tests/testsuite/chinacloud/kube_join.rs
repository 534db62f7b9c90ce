//! Pools in TKE and ACK clusters (`kubernetes { cluster_id }`) through the CLI: new nodes
//! join the cluster with gpuplan's labels, spot nodes with the spot taint (TKE
//! `AddExistedInstances` and `CreateClusterInstances`, ACK `AttachInstances` and a node
//! pool, against the signature-checking fakes), and jobs are submitted to the cluster
//! whose kubeconfig the cloud hands out (the Kubernetes API server double).

use serde_json::{Value, json};

use crate::chinacloud::{Fleet, alibaba_fake, tencent_fake};
use crate::kube_fake::FakeApi;

fn pool_and_job(provider: &str, zone: &str, gpu: &str, itype: &str, mix: &str, kubernetes: &str) -> String {
    format!(
        r#"
gpu_pool "train" {{
  provider       = "{provider}"
  zones          = ["{zone}"]
  gpu            = "{gpu}"
  gpus_per_node  = 1
  instance_types = ["{itype}"]
  nodes {{
    min     = 0
    desired = 2
    max     = 4
  }}
  mix {{
{mix}
  }}
  kubernetes {{
{kubernetes}
  }}
}}

job_template "eval" {{
  image       = "nginx:1.27"
  gpus        = 1
  preemptible = true
}}

job "ft" {{
  template = job_template.eval
  pool     = gpu_pool.train
}}
"#
    )
}

fn labels(body: &Value, list: &str, key: &str, value: &str) -> Vec<(String, String)> {
    body.pointer(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|l| (l[key].as_str().unwrap_or("").to_string(), l[value].as_str().unwrap_or("").to_string()))
        .collect()
}

#[test]
fn tke_pool_nodes_join_the_cluster_and_jobs_go_to_it() {
    let api = FakeApi::start();
    let fake = tencent_fake::Fake::start();
    fake.lock().kube_server = Some(api.url.clone());
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}",
        fake.url,
        pool_and_job(
            "tencentcloud",
            "ap-guangzhou-3",
            "T4",
            "GN7.2XLARGE32",
            "    spot_percent = 0",
            "    cluster_id = \"cls-gpuplan\"\n    namespace  = \"ml\""
        )
    );
    let env =
        [("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY)];
    let f = Fleet::new(&spec, &env);
    f.run(&["apply", "--auto-approve"]).expect(0);

    // Both new CVMs joined cls-gpuplan with the labels Jobs select, keeping the image's login.
    let joined = fake.lock().joined.clone();
    let ids: Vec<String> = fake.instances().iter().map(|i| i.id.clone()).collect();
    assert_eq!(ids.len(), 2);
    for id in &ids {
        let (cluster, body) = joined.get(id).unwrap_or_else(|| panic!("{id} did not join: {joined:?}"));
        assert_eq!(cluster, "cls-gpuplan");
        let l = labels(body, "/InstanceAdvancedSettings/Labels", "Name", "Value");
        assert!(l.contains(&("gpuplan.dev/pool".into(), "train".into())), "{l:?}");
        assert!(l.contains(&("gpuplan.dev/capacity".into(), "on-demand".into())), "{l:?}");
        assert_eq!(body["LoginSettings"]["KeepImageLogin"], "true");
    }
    // The job went to the cluster TKE's kubeconfig names.
    assert!(!fake.calls("DescribeClusterKubeconfig").is_empty());
    let job = api.job("ml", "ft").expect("the Job was submitted to the TKE cluster");
    assert_eq!(job["spec"]["template"]["spec"]["nodeSelector"]["gpuplan.dev/pool"], "train");
}

fn taints(body: &Value, list: &str, key: &str, value: &str, effect: &str) -> Vec<String> {
    body.pointer(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}={}:{}",
                t[key].as_str().unwrap_or(""),
                t[value].as_str().unwrap_or(""),
                t[effect].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// The spot CVMs TKE created in the cluster (CreateClusterInstances), by id.
fn tke_created_spot(fake: &tencent_fake::Fake) -> Vec<String> {
    let s = fake.lock();
    s.created_in_cluster
        .iter()
        .filter(|(id, _)| s.instances.get(*id).is_some_and(|i| i.charge_type == "SPOTPAID"))
        .map(|(id, _)| id.clone())
        .collect()
}

/// The spot share of a TKE pool: TKE creates the spot CVMs in the cluster itself
/// (`CreateClusterInstances` with `SPOTPAID` in `RunInstancePara`, gpuplan's tags and
/// ClientToken), with the spot label and taint; on-demand CVMs still join by
/// `AddExistedInstances`. A reclaimed spot node is seen by the next plan and replaced.
#[test]
fn tke_spot_nodes_are_created_in_the_cluster_tainted_and_a_reclaimed_one_is_replaced() {
    let api = FakeApi::start();
    let fake = tencent_fake::Fake::start();
    fake.lock().kube_server = Some(api.url.clone());
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}",
        fake.url,
        pool_and_job(
            "tencentcloud",
            "ap-guangzhou-3",
            "T4",
            "GN7.2XLARGE32",
            "    on_demand_base = 1\n    spot_percent   = 100",
            "    cluster_id = \"cls-gpuplan\"\n    namespace  = \"ml\""
        )
    );
    let env =
        [("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY)];
    let f = Fleet::new(&spec, &env);
    let v = f.run(&["validate"]).expect(0);
    assert!(!v.stderr.contains("tke_spot"), "spot TKE pools are valid now: {}", v.stderr);
    let p = f.run(&["plan"]).expect(0);
    assert!(p.stdout.contains("joins TKE cls-gpuplan as spot, tainted"), "{}", p.stdout);
    assert!(p.stdout.contains("joins TKE cls-gpuplan as on-demand"), "{}", p.stdout);
    f.run(&["apply", "--auto-approve"]).expect(0);

    let spot = tke_created_spot(&fake);
    assert_eq!(spot.len(), 1, "one spot CVM created in the cluster: {:?}", fake.lock().created_in_cluster.keys());
    let check_spot = |id: &str| {
        let (cluster, body) = fake.lock().created_in_cluster.get(id).cloned().expect("created in the cluster");
        assert_eq!(cluster, "cls-gpuplan");
        let para = &body["RunInstancePara"];
        assert_eq!(para["InstanceChargeType"], "SPOTPAID", "{para}");
        assert_eq!(para["InstanceMarketOptions"]["MarketType"], "spot", "{para}");
        assert!(para["ClientToken"].as_str().is_some_and(|t| t.starts_with("gp-")), "idempotent: {para}");
        let l = labels(&body, "/InstanceAdvancedSettings/Labels", "Name", "Value");
        assert!(l.contains(&("gpuplan.dev/pool".into(), "train".into())), "{l:?}");
        assert!(l.contains(&("gpuplan.dev/capacity".into(), "spot".into())), "{l:?}");
        let t = taints(&body, "/InstanceAdvancedSettings/Taints", "Key", "Value", "Effect");
        assert_eq!(t, ["gpuplan.dev/capacity=spot:NoSchedule"]);
        let tags = fake.lock().instances[id].tags.clone();
        assert_eq!(tags.get("gpuplan:managed").map(String::as_str), Some("true"), "gpuplan owns it: {tags:?}");
    };
    check_spot(&spot[0]);
    // The on-demand node joined as before, labelled, untainted; no spot CVM was offered
    // to AddExistedInstances (TKE refuses them there).
    let joined = fake.lock().joined.clone();
    assert_eq!(joined.len(), 1, "{joined:?}");
    let (od_id, (_, od_body)) = joined.iter().next().expect("one joined");
    assert_eq!(fake.lock().instances[od_id].charge_type, "POSTPAID_BY_HOUR");
    let l = labels(od_body, "/InstanceAdvancedSettings/Labels", "Name", "Value");
    assert!(l.contains(&("gpuplan.dev/capacity".into(), "on-demand".into())), "{l:?}");
    assert!(taints(od_body, "/InstanceAdvancedSettings/Taints", "Key", "Value", "Effect").is_empty());

    // The cloud reclaims the spot CVM: the next plan shows it, apply replaces it in the
    // cluster, tainted like the first, and the state forgets the reclaimed one.
    let reclaimed = spot[0].clone();
    fake.set_state(&reclaimed, "SHUTDOWN");
    let p = f.run(&["plan"]).expect(0);
    assert!(p.stdout.contains(&reclaimed), "the reclaim is shown: {}", p.stdout);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let after = tke_created_spot(&fake);
    let new: Vec<&String> = after.iter().filter(|id| **id != reclaimed).collect();
    assert_eq!(new.len(), 1, "one replacement created in the cluster: {after:?}");
    check_spot(new[0]);
    let text = std::fs::read_to_string(f.path().join("state/default.json")).expect("state");
    let state: Value = crate::state_plain::plain(serde_json::from_str(&text).expect("state JSON"));
    let nodes: Vec<&str> = state["resources"]["gpu_pool.train"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["id"].as_str())
        .collect();
    assert!(!nodes.contains(&reclaimed.as_str()), "the reclaimed node is forgotten: {nodes:?}");
    assert!(nodes.contains(&new[0].as_str()) && nodes.contains(&od_id.as_str()), "{nodes:?}");
    assert_eq!(nodes.len(), 2, "{nodes:?}");
}

#[test]
fn ack_pool_nodes_are_attached_with_labels_and_jobs_go_to_the_cluster() {
    let api = FakeApi::start();
    let fake = alibaba_fake::Fake::start();
    fake.lock().kube_server = Some(api.url.clone());
    let spec = format!(
        "provider \"alicloud\" {{\n  region = \"cn-hangzhou\"\n  image  = \"m-gpuplan\"\n}}\n{}",
        pool_and_job(
            "alicloud",
            "cn-hangzhou-h",
            "T4",
            "ecs.gn6i-c4g1.xlarge",
            "    spot_percent = 0",
            "    cluster_id = \"c-gpuplan\"\n    namespace  = \"ml\"\n    key_pair   = \"gpuplan-key\""
        )
    );
    let env = [
        ("ALIBABA_CLOUD_ACCESS_KEY_ID", alibaba_fake::ACCESS_KEY_ID),
        ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", alibaba_fake::ACCESS_KEY_SECRET),
        ("GPUPLAN_ALICLOUD_ENDPOINT", fake.url.as_str()),
    ];
    let f = Fleet::new(&spec, &env);
    f.run(&["apply", "--auto-approve"]).expect(0);

    let attached = fake.lock().attached.clone();
    assert_eq!(attached.len(), 2, "{attached:?}");
    let capacities: Vec<String> = attached
        .values()
        .map(|(cluster, body)| {
            assert_eq!(cluster, "c-gpuplan");
            assert_eq!(body["key_pair"], "gpuplan-key");
            assert_eq!(body["format_disk"], false, "data disks are kept");
            let l = labels(body, "/tags", "key", "value");
            assert!(l.contains(&("gpuplan.dev/pool".into(), "train".into())), "{l:?}");
            l.into_iter().find(|(k, _)| k == "gpuplan.dev/capacity").map(|(_, v)| v).expect("a capacity label")
        })
        .collect();
    assert_eq!(capacities, ["on-demand", "on-demand"]);
    assert!(fake.lock().node_pools.is_empty(), "on-demand nodes need no node pool");
    assert!(api.job("ml", "ft").is_some(), "the Job was submitted to the ACK cluster");
}

#[test]
fn ack_needs_a_key_pair_to_attach_nodes() {
    let spec = format!(
        "provider \"alicloud\" {{\n  region = \"cn-hangzhou\"\n  image  = \"m-gpuplan\"\n}}\n{}",
        pool_and_job(
            "alicloud",
            "cn-hangzhou-h",
            "T4",
            "ecs.gn6i-c4g1.xlarge",
            "    spot_percent = 0",
            "    cluster_id = \"c-gpuplan\""
        )
    );
    let f = Fleet::new(&spec, &[]);
    let r = f.run(&["validate"]).expect(1);
    assert!(r.stderr.contains("gpuplan::spec::ack_key_pair"), "{}", r.stderr);
    assert!(r.stderr.contains("key_pair = \"NAME\""), "{}", r.stderr);
}

/// An attached instance: its id, node labels and taints (`key=value:effect`).
type AckNode = (String, Vec<(String, String)>, Vec<String>);

/// What ACK puts on each node it attached, by instance id: the `tags` of AttachInstances,
/// or the labels and taints of the node pool it was attached to.
fn ack_nodes(fake: &alibaba_fake::Fake) -> Vec<AckNode> {
    let s = fake.lock();
    let plain = s.attached.iter().map(|(id, (_, body))| (id.clone(), labels(body, "/tags", "key", "value"), vec![]));
    let pooled = s.pool_attached.iter().map(|(id, (pool, _))| {
        let k = &s.node_pools[pool];
        (
            id.clone(),
            labels(k, "/kubernetes_config/labels", "key", "value"),
            taints(k, "/kubernetes_config/taints", "key", "value", "effect"),
        )
    });
    plain.chain(pooled).collect()
}

fn capacity(labels: &[(String, String)]) -> &str {
    labels.iter().find(|(k, _)| k == "gpuplan.dev/capacity").map(|(_, v)| v.as_str()).unwrap_or("")
}

/// ACK's AttachInstances takes no taints, so spot ECS nodes are attached to a node pool
/// gpuplan creates once per pool (`CreateClusterNodePool` with the labels and the spot
/// taint, no expected node count, then `AttachInstancesToNodePool`); on-demand nodes
/// keep AttachInstances. A spot node the cloud reclaims is seen by the next apply and
/// replaced by a spot node attached to the same node pool.
#[test]
fn ack_spot_nodes_join_a_tainted_node_pool_and_a_reclaimed_one_is_replaced() {
    let api = FakeApi::start();
    let fake = alibaba_fake::Fake::start();
    fake.lock().kube_server = Some(api.url.clone());
    let spec = format!(
        "provider \"alicloud\" {{\n  region  = \"cn-hangzhou\"\n  image   = \"m-gpuplan\"\n  subnets = {{ \"cn-hangzhou-h\" = \"vsw-gpuplan\" }}\n}}\n{}",
        pool_and_job(
            "alicloud",
            "cn-hangzhou-h",
            "T4",
            "ecs.gn6i-c4g1.xlarge",
            "    on_demand_base = 1\n    spot_percent   = 100",
            "    cluster_id = \"c-gpuplan\"\n    namespace  = \"ml\"\n    key_pair   = \"gpuplan-key\""
        )
    );
    let env = [
        ("ALIBABA_CLOUD_ACCESS_KEY_ID", alibaba_fake::ACCESS_KEY_ID),
        ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", alibaba_fake::ACCESS_KEY_SECRET),
        ("GPUPLAN_ALICLOUD_ENDPOINT", fake.url.as_str()),
    ];
    let f = Fleet::new(&spec, &env);
    let v = f.run(&["validate"]).expect(0);
    assert!(!v.stderr.contains("ack_spot_untainted"), "spot ACK nodes are tainted now: {}", v.stderr);
    let p = f.run(&["plan"]).expect(0);
    assert!(p.stdout.contains("joins ACK c-gpuplan as spot, tainted"), "{}", p.stdout);
    f.run(&["apply", "--auto-approve"]).expect(0);

    let first = ack_nodes(&fake);
    assert_eq!(first.len(), 2, "{first:?}");
    let spot: Vec<_> = first.iter().filter(|(_, l, _)| capacity(l) == "spot").collect();
    assert_eq!(spot.len(), 1, "{first:?}");
    let (reclaimed, l, t) = spot[0].clone();
    assert!(l.contains(&("gpuplan.dev/pool".into(), "train".into())), "{l:?}");
    assert_eq!(t, ["gpuplan.dev/capacity=spot:NoSchedule"]);
    assert!(fake.lock().pool_attached.contains_key(&reclaimed), "spot goes through the node pool");
    let od: Vec<_> = first.iter().filter(|(_, l, _)| capacity(l) == "on-demand").collect();
    assert!(od.len() == 1 && od[0].2.is_empty(), "on-demand joins untainted by AttachInstances: {first:?}");
    // The node pool: gpuplan's, for spot, logging in with the key pair; ACK never sizes it.
    let pools = fake.lock().node_pools.clone();
    assert_eq!(pools.len(), 1, "{pools:?}");
    let pool = pools.values().next().expect("one node pool");
    assert_eq!(pool["scaling_group"]["spot_strategy"], "SpotAsPriceGo", "{pool}");
    assert_eq!(pool["scaling_group"]["key_pair"], "gpuplan-key", "{pool}");
    assert_eq!(pool["scaling_group"]["vswitch_ids"], json!(["vsw-gpuplan"]), "{pool}");
    assert!(pool["scaling_group"].get("desired_size").is_none(), "ACK must not replace nodes itself: {pool}");
    let strategy = |id: &str| fake.lock().instances.get(id).map(|i| i.spot_strategy.clone());
    assert_eq!(strategy(&reclaimed).as_deref(), Some("SpotAsPriceGo"));

    fake.reclaim(&reclaimed);
    let r = f.run(&["apply", "--auto-approve"]).expect(0);
    assert!(r.stdout.contains(&reclaimed), "the reclaim is shown: {}", r.stdout);
    let after = ack_nodes(&fake);
    let new: Vec<_> = after.iter().filter(|(id, _, _)| !first.iter().any(|(f, _, _)| f == id)).collect();
    assert_eq!(new.len(), 1, "one replacement attached: {after:?}");
    assert_eq!(capacity(&new[0].1), "spot", "{after:?}");
    assert_eq!(new[0].2, ["gpuplan.dev/capacity=spot:NoSchedule"], "{after:?}");
    assert_eq!(strategy(&new[0].0).as_deref(), Some("SpotAsPriceGo"));
    assert_eq!(fake.lock().node_pools.len(), 1, "the node pool is found again, not created twice");
    // The cloud releases what it reclaims; gpuplan forgets it, as in VM pools.
    let text = std::fs::read_to_string(f.path().join("state/default.json")).expect("state");
    let state: Value = crate::state_plain::plain(serde_json::from_str(&text).expect("state JSON"));
    let nodes: Vec<&str> = state["resources"]["gpu_pool.train"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["id"].as_str())
        .collect();
    assert!(!nodes.contains(&reclaimed.as_str()), "the reclaimed node is forgotten: {nodes:?}");
    assert!(nodes.contains(&new[0].0.as_str()), "its replacement is recorded: {nodes:?}");
    assert_eq!(nodes.len(), 2, "{nodes:?}");
}

/// Spot nodes join ACK through a node pool, whose scaling group names the zone's
/// vSwitch: without one, apply says which `subnets` entry is missing and launches nothing.
#[test]
fn ack_spot_without_a_vswitch_launches_nothing_and_says_why() {
    let fake = alibaba_fake::Fake::start();
    let spec = format!(
        "provider \"alicloud\" {{\n  region = \"cn-hangzhou\"\n  image  = \"m-gpuplan\"\n}}\n{}",
        pool_and_job(
            "alicloud",
            "cn-hangzhou-h",
            "T4",
            "ecs.gn6i-c4g1.xlarge",
            "    spot_percent = 100",
            "    cluster_id = \"c-gpuplan\"\n    key_pair   = \"gpuplan-key\""
        )
    );
    let env = [
        ("ALIBABA_CLOUD_ACCESS_KEY_ID", alibaba_fake::ACCESS_KEY_ID),
        ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", alibaba_fake::ACCESS_KEY_SECRET),
        ("GPUPLAN_ALICLOUD_ENDPOINT", fake.url.as_str()),
    ];
    let f = Fleet::new(&spec, &env);
    let r = f.run(&["apply", "--auto-approve"]).expect(1);
    assert!(r.stderr.contains("needs the vSwitch of cn-hangzhou-h"), "{}", r.stderr);
    assert!(r.stderr.contains("subnets = { \"cn-hangzhou-h\" = \"vsw-…\" }"), "{}", r.stderr);
    assert!(fake.instances().is_empty(), "nothing launched");
    assert!(fake.lock().node_pools.is_empty());
}

/// When TKE has no spot stock, the pool falls back to on-demand as VM pools do: the
/// on-demand CVMs join by AddExistedInstances, labelled on-demand and untainted.
#[test]
fn tke_spot_stock_out_falls_back_to_on_demand_nodes_in_the_cluster() {
    let api = FakeApi::start();
    let fake = tencent_fake::Fake::start();
    fake.lock().kube_server = Some(api.url.clone());
    fake.sell_out("ap-guangzhou-3", true);
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}",
        fake.url,
        pool_and_job(
            "tencentcloud",
            "ap-guangzhou-3",
            "T4",
            "GN7.2XLARGE32",
            "    spot_percent = 100\n    fallback     = \"on_demand\"",
            "    cluster_id = \"cls-gpuplan\""
        )
    );
    let env =
        [("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY)];
    let f = Fleet::new(&spec, &env);
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert!(!fake.calls("CreateClusterInstances").is_empty(), "spot was tried in the cluster first");
    assert!(fake.lock().created_in_cluster.is_empty());
    let joined = fake.lock().joined.clone();
    assert_eq!(joined.len(), 2, "{joined:?}");
    for (_, body) in joined.values() {
        let l = labels(body, "/InstanceAdvancedSettings/Labels", "Name", "Value");
        assert!(l.contains(&("gpuplan.dev/capacity".into(), "on-demand".into())), "{l:?}");
        assert!(taints(body, "/InstanceAdvancedSettings/Taints", "Key", "Value", "Effect").is_empty());
    }
}
