//! Groups that pack a pool's nodes close, and fast fabrics, on Tencent Cloud and Alibaba
//! Cloud against the signature-checking fakes (issue 52 item 2): a Tencent pool with
//! `fabric = "rdma"` gets an HPC cluster per zone (its HCC nodes launch only into one); an
//! Alibaba pool with `placement_group = "cluster"` gets a `LowLatency` deployment set per
//! zone, and with `fabric = "erdma"` an elastic RDMA interface on each node. Apply makes
//! each group before the nodes that launch into it, every launch names it, a second apply
//! makes nothing, destroy deletes the groups after the nodes.

use gpuplan::providers::{TAG_LINEAGE, TAG_MANAGED};

use crate::chinacloud::{Fleet, Run, alibaba_fake, tencent_fake};

/// The position of the first and last call of `action` in `calls`.
fn span(calls: &[(String, String)], action: &str) -> (usize, usize) {
    let at: Vec<usize> = calls.iter().enumerate().filter(|(_, (a, _))| a == action).map(|(i, _)| i).collect();
    (*at.first().unwrap_or_else(|| panic!("no {action} in {calls:?}")), *at.last().unwrap())
}

/// Group `name` of pool `train` in `zone` under the lineage of the state in `f`.
fn group(f: &Fleet, zone: &str) -> String {
    let state = crate::state_plain::read(&f.path().join("state/default.json"));
    let lineage: String =
        state["lineage"].as_str().unwrap().chars().filter(char::is_ascii_alphanumeric).take(8).collect();
    format!("gpuplan-{lineage}-train-{zone}")
}

/// The group names a plan's text shows, each after `noun`, the cloud's word for it; no
/// other cloud's word is used.
fn planned_groups(r: &Run, noun: &str) -> Vec<String> {
    for other in ["placement group", "HPC cluster", "deployment set"].into_iter().filter(|w| *w != noun) {
        assert!(!r.stdout.contains(other), "`{other}` in a plan of {noun}s: {}", r.stdout);
    }
    let mut names: Vec<String> = r
        .stdout
        .split(&format!("{noun} "))
        .skip(1)
        .filter_map(|s| s.split(|c: char| c.is_whitespace() || c == ',' || c == ')').next())
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The groups a plan made before any state exists launches into, each after `noun`, the
/// cloud's word for it (no other cloud's word is used): named only after apply (the
/// state's lineage is in their names), one `NOUN (known after apply)` each.
fn unnamed_groups(r: &Run, noun: &str) -> usize {
    for other in ["placement group", "HPC cluster", "deployment set"].into_iter().filter(|w| *w != noun) {
        assert!(!r.stdout.contains(other), "`{other}` in a plan of {noun}s: {}", r.stdout);
    }
    assert!(!r.stdout.contains(&format!("{noun} gpuplan-")), "a first plan names a group:\n{}", r.stdout);
    r.stdout.matches(&format!("{noun} (known after apply)")).count()
}

const TENCENT: &str = r#"
gpu_pool "train" {
  provider      = "tencentcloud"
  zones         = ["ap-guangzhou-3", "ap-guangzhou-4"]
  gpu           = "V100-32GB"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = 4
    max     = 8
  }
  network {
    fabric = "rdma"
  }
}
"#;

#[test]
fn a_tencent_rdma_pool_launches_into_an_hpc_cluster_per_zone_made_first_and_deleted_after_its_nodes() {
    let fake = tencent_fake::Fake::start();
    let provider = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n",
        fake.url
    );
    let f = Fleet::new(
        &(provider + TENCENT),
        &[("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY)],
    );
    let r = f.run(&["plan"]).expect(0);
    assert!(r.stdout.contains("HCCG5v.24XLARGE384"), "the RDMA type is chosen: {}", r.stdout);
    assert!(r.stdout.contains("fabric rdma"), "{}", r.stdout);
    assert_eq!(unnamed_groups(&r, "HPC cluster"), 2, "one HPC cluster per zone: {}", r.stdout);

    let r = f.run(&["apply", "--auto-approve"]).expect(0);
    let names = [group(&f, "ap-guangzhou-3"), group(&f, "ap-guangzhou-4")];
    assert!(r.stderr.contains(&format!("HPC cluster {} ready", names[0])), "{}", r.stderr);
    {
        let s = fake.lock();
        assert_eq!(s.instances.len(), 4);
        let (_, last_create) = span(&s.calls, "CreateHpcCluster");
        let (first_run, _) = span(&s.calls, "RunInstances");
        assert!(last_create < first_run, "clusters before nodes: {:?}", s.calls);
        let made: Vec<&str> = s.hpc_clusters.values().filter_map(|c| c["Name"].as_str()).collect();
        assert_eq!(made.len(), 2, "{made:?}");
        for c in s.hpc_clusters.values() {
            assert!(names.iter().any(|n| c["Name"] == n.as_str()), "{c} under gpuplan's name for its zone");
            assert_eq!(c["Tags"][TAG_MANAGED], "true", "{c}");
            assert!(c["Tags"][TAG_LINEAGE].is_string(), "{c}");
            assert!(c["Remark"].as_str().is_some_and(|r| r.starts_with("gpuplan lineage ")), "{c}");
        }
        for (id, i) in &s.instances {
            let cluster = s.hpc_of.get(id).unwrap_or_else(|| panic!("{id} launched without HpcClusterId"));
            assert_eq!(s.hpc_clusters[cluster]["Zone"], i.zone.as_str(), "{id} in its zone's cluster");
            assert_eq!(i.instance_type, "HCCG5v.24XLARGE384");
        }
    }
    let r = f.run(&["plan", "--detailed-exitcode"]).expect(0);
    assert_eq!(fake.calls("CreateHpcCluster").len(), 2, "nothing more to make: {}", r.stdout);
    let r = f.run(&["plan", "--destroy"]).expect(0);
    assert_eq!(planned_groups(&r, "HPC cluster"), names, "{}", r.stdout);
    assert!(r.stdout.contains(&format!("- HPC cluster {} (after its nodes)", names[0])), "{}", r.stdout);

    f.run(&["destroy", "--auto-approve"]).expect(0);
    let s = fake.lock();
    assert!(s.instances.is_empty(), "nodes gone");
    assert!(s.hpc_clusters.is_empty(), "clusters deleted");
    let (_, last_terminate) = span(&s.calls, "TerminateInstances");
    let (first_delete, _) = span(&s.calls, "DeleteHpcClusters");
    assert!(last_terminate < first_delete, "clusters after nodes: {:?}", s.calls);
}

fn alibaba(fake: &alibaba_fake::Fake, network: &str) -> Fleet {
    Fleet::new(
        &alibaba_spec(network, 2),
        &[
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", alibaba_fake::ACCESS_KEY_ID),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", alibaba_fake::ACCESS_KEY_SECRET),
            ("GPUPLAN_ALICLOUD_ENDPOINT", &fake.url),
        ],
    )
}

fn alibaba_spec(network: &str, desired: u32) -> String {
    format!(
        r#"provider "alicloud" {{
  region          = "cn-hangzhou"
  image           = "m-gpuplan"
  subnets         = {{ "cn-hangzhou-h" = "vsw-gpuplan" }}
  security_groups = ["sg-gpuplan"]
}}

gpu_pool "train" {{
  provider      = "alicloud"
  zones         = ["cn-hangzhou-h"]
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {{
    min     = 0
    desired = {desired}
    max     = 4
  }}
  network {{
{network}
  }}
}}
"#
    )
}

#[test]
fn an_alibaba_cluster_pool_launches_into_a_low_latency_deployment_set_with_an_erdma_interface() {
    let fake = alibaba_fake::Fake::start();
    let f = alibaba(&fake, "    fabric          = \"erdma\"\n    placement_group = \"cluster\"");
    let r = f.run(&["plan"]).expect(0);
    assert!(r.stdout.contains("ecs.ebmgn7ex.32xlarge"), "the eRDMA type is chosen: {}", r.stdout);
    assert!(r.stdout.contains("fabric erdma"), "{}", r.stdout);
    assert_eq!(unnamed_groups(&r, "deployment set"), 1, "{}", r.stdout);

    f.run(&["apply", "--auto-approve"]).expect(0);
    let names = [group(&f, "cn-hangzhou-h")];
    {
        let s = fake.lock();
        assert_eq!(s.instances.len(), 2);
        let (_, created) = span(&s.calls, "CreateDeploymentSet");
        let (first_run, _) = span(&s.calls, "RunInstances");
        assert!(created < first_run, "set before nodes: {:?}", s.calls);
        assert_eq!(s.deployment_sets.len(), 1);
        let (set_id, set) = s.deployment_sets.iter().next().unwrap();
        assert_eq!(set["DeploymentSetName"], names[0].as_str());
        assert_eq!(set["DeploymentStrategy"], "LowLatency", "the strategy that packs nodes close");
        for id in s.instances.keys() {
            assert_eq!(s.set_of.get(id), Some(set_id), "{id} launched into the set");
            let nic = &s.interfaces[id];
            let at = |k: &str| nic.get(&format!("NetworkInterface.1.{k}")).map(String::as_str);
            assert_eq!(at("NetworkInterfaceTrafficMode"), Some("HighPerformance"), "{nic:?}");
            assert_eq!(at("InstanceType"), Some("Secondary"), "{nic:?}");
            assert_eq!((at("VSwitchId"), at("SecurityGroupId")), (Some("vsw-gpuplan"), Some("sg-gpuplan")));
        }
    }
    f.run(&["plan", "--detailed-exitcode"]).expect(0);
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(fake.calls("CreateDeploymentSet").len(), 1, "a second apply makes nothing");
    let r = f.run(&["plan", "--destroy"]).expect(0);
    assert!(r.stdout.contains(&format!("- deployment set {} (after its nodes)", names[0])), "{}", r.stdout);

    f.run(&["destroy", "--auto-approve"]).expect(0);
    let s = fake.lock();
    assert!(s.instances.is_empty() && s.deployment_sets.is_empty(), "nodes and set gone");
    let (_, deleted_nodes) = span(&s.calls, "DeleteInstances");
    let (deleted_set, _) = span(&s.calls, "DeleteDeploymentSet");
    assert!(deleted_nodes < deleted_set, "set after nodes: {:?}", s.calls);
}

#[test]
fn a_deployment_set_of_gpuplan_s_name_this_state_did_not_make_is_refused_before_any_launch() {
    let fake = alibaba_fake::Fake::start();
    let f = alibaba(&fake, "    placement_group = \"cluster\"");
    // An apply of no nodes fixes the lineage (and so the name); someone else's set takes it.
    std::fs::write(f.path().join("main.hcl"), alibaba_spec("    placement_group = \"cluster\"", 0)).unwrap();
    f.run(&["apply", "--auto-approve"]).expect(0);
    std::fs::write(f.path().join("main.hcl"), alibaba_spec("    placement_group = \"cluster\"", 2)).unwrap();
    fake.lock().deployment_sets.insert(
        "ds-someone".into(),
        serde_json::json!({"DeploymentSetId": "ds-someone", "DeploymentSetName": group(&f, "cn-hangzhou-h"), "Region": "cn-hangzhou",
            "DeploymentStrategy": "LowLatency", "DeploymentSetDescription": "the data team's"}),
    );
    let r = f.run(&["apply", "--auto-approve"]);
    assert_ne!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let out = r.stdout + &r.stderr;
    assert!(out.contains("was not made by this state"), "{out}");
    let s = fake.lock();
    assert!(s.calls.iter().all(|(a, _)| a != "RunInstances" && a != "CreateDeploymentSet"), "{:?}", s.calls);
    assert!(s.instances.is_empty());
}

#[test]
fn an_alibaba_erdma_pool_without_a_group_launches_no_deployment_set() {
    let fake = alibaba_fake::Fake::start();
    let f = alibaba(&fake, "    fabric = \"erdma\"");
    f.run(&["apply", "--auto-approve"]).expect(0);
    let s = fake.lock();
    assert_eq!(s.instances.len(), 2);
    assert!(s.set_of.is_empty() && s.deployment_sets.is_empty(), "no group asked, none made");
    assert!(s.calls.iter().all(|(a, _)| !a.contains("DeploymentSet")), "{:?}", s.calls);
    assert!(s.interfaces.values().all(|n| n["NetworkInterface.1.NetworkInterfaceTrafficMode"] == "HighPerformance"));
}

/// A multi-node job on a Tencent RDMA pool of no warm nodes: each replica's node is of
/// the pool's HCC type in the pool's first zone, in that zone's HPC cluster (made for
/// the job, as CVM launches HCC types nowhere else); destroy deletes it after the nodes.
#[test]
fn a_multi_node_job_on_a_tencent_rdma_pool_launches_its_replicas_into_the_first_zone_s_hpc_cluster() {
    let fake = tencent_fake::Fake::start();
    let provider = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n",
        fake.url
    );
    let jobs = "job_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 8\n  retries = 0\n}\n\n\
job \"train\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n  replicas = 2\n}\n";
    let f = Fleet::new(
        &(provider + &TENCENT.replace("desired = 4", "desired = 0") + jobs),
        &[("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY)],
    );
    // Without `zones`, a removed pool's cluster could not be found again: refused.
    let main = std::fs::read_to_string(f.path().join("main.hcl")).unwrap();
    let unzoned = main.replace("  zones         = [\"ap-guangzhou-3\", \"ap-guangzhou-4\"]\n", "");
    std::fs::write(f.path().join("main.hcl"), &unzoned).unwrap();
    let r = f.run(&["validate"]).expect(1);
    assert!(
        r.stderr.contains("runs on `gpu_pool.train`, whose RDMA job nodes need")
            && r.stderr.contains("this pool names no `zones`"),
        "{}",
        r.stderr
    );
    std::fs::write(f.path().join("main.hcl"), main).unwrap();
    f.run(&["apply", "--auto-approve"]).expect(0);
    // Replica 0 first; the others once a refresh reads its address.
    f.run(&["apply", "--auto-approve"]).expect(0);
    let name = group(&f, "ap-guangzhou-3");
    {
        let s = fake.lock();
        assert_eq!(s.instances.len(), 2, "a node per replica: {:?}", s.instances.keys());
        assert_eq!(s.hpc_clusters.len(), 1, "the first zone's cluster only");
        let (id, cluster) = s.hpc_clusters.iter().next().unwrap();
        assert_eq!(cluster["Name"], name.as_str());
        assert!(cluster["Tags"].get("gpuplan:job").is_none(), "the pool's tags, not a run's: {cluster}");
        for (i, node) in &s.instances {
            assert_eq!(s.hpc_of.get(i), Some(id), "{i} in the cluster");
            assert_eq!((node.zone.as_str(), node.instance_type.as_str()), ("ap-guangzhou-3", "HCCG5v.24XLARGE384"));
        }
    }
    f.run(&["destroy", "--auto-approve"]).expect(0);
    let s = fake.lock();
    assert!(s.instances.is_empty() && s.hpc_clusters.is_empty(), "{:?}", s.hpc_clusters);
}

#[test]
fn an_hpc_cluster_of_gpuplan_s_name_this_state_did_not_make_is_refused_before_any_launch() {
    let fake = tencent_fake::Fake::start();
    let provider = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n",
        fake.url
    );
    let env =
        [("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY)];
    // An apply of no nodes fixes the lineage (and so the name); someone else's cluster takes it.
    let f = Fleet::new(&(provider.clone() + &TENCENT.replace("desired = 4", "desired = 0")), &env);
    f.run(&["apply", "--auto-approve"]).expect(0);
    std::fs::write(f.path().join("main.hcl"), provider + TENCENT).unwrap();
    let taken = group(&f, "ap-guangzhou-3");
    fake.lock().hpc_clusters.insert(
        "hpc-someone".into(),
        serde_json::json!({"HpcClusterId": "hpc-someone", "Name": taken, "Zone": "ap-guangzhou-3",
            "Region": "ap-guangzhou", "Remark": "the data team's", "Tags": {}}),
    );
    let r = f.run(&["apply", "--auto-approve"]);
    assert_ne!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!((r.stdout + &r.stderr).contains("was not made by this state"));
    let s = fake.lock();
    assert!(s.instances.values().all(|i| i.zone != "ap-guangzhou-3"), "nothing launched into the taken zone");
    assert!(s.hpc_clusters.contains_key("hpc-someone"), "never taken over");
    assert!(s.hpc_of.values().all(|c| c != "hpc-someone"), "no node in someone else's cluster");
}

/// A pool asking no fabric keeps its usual type: Tencent's HCC types (which launch only
/// into an HPC cluster) are not even considered for it, and Alibaba's bare-metal eRDMA
/// type, priced as its VM sibling, loses the tie to it (and stays a fallback type).
#[test]
fn a_pool_without_a_fabric_picks_no_hpc_type_and_prefers_the_vm_at_one_price() {
    let fake = alibaba_fake::Fake::start();
    let r = alibaba(&fake, "").run(&["plan"]).expect(0);
    assert!(r.stdout.contains("(ecs.gn7e-c16g1.32xlarge or 1 other type)"), "{}", r.stdout);
    assert!(r.stdout.contains("*ecs.gn7e-c16g1.32xlarge"), "chosen: {}", r.stdout);

    let fake = tencent_fake::Fake::start();
    let provider = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n",
        fake.url
    );
    let f = Fleet::new(
        &(provider + &TENCENT.replace("fabric = \"rdma\"", "")),
        &[("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY)],
    );
    let r = f.run(&["plan"]).expect(0);
    assert!(r.stdout.contains("*GN10X"), "{}", r.stdout);
    assert!(!r.stdout.contains("HCC"), "not even considered: {}", r.stdout);
}
