//! EFA on AWS (issue 52 item 2, `network { fabric = "efa" }`), through the real AWS SDK
//! against moto behind a recording front: each node takes as many EFA interfaces as
//! `DescribeInstanceTypes` says its type allows (moto serves `EfaInfo`), so a pool of two
//! types with different counts has one launch template per count and one fleet with a
//! config for each; the pool's security group gets the self-referencing all-traffic
//! rules once; a second apply sends none of it again.

use std::collections::BTreeMap;

use gpuplan::providers::aws::AwsSettings;

use crate::aws::cli::run;
use crate::aws::fake_ec2::{FakeEc2, Request};

fn moto() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!("GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`"),
    }
}

pub(crate) async fn client(region: &str) -> aws_sdk_ec2::Client {
    let settings = AwsSettings {
        name: "aws".into(),
        endpoint: Some(moto()),
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        ..Default::default()
    };
    AwsSettings::client(&settings.load().await, region)
}

/// A fresh security group in moto's default VPC, by id.
pub(crate) async fn security_group(c: &aws_sdk_ec2::Client, name: &str) -> String {
    let out =
        c.create_security_group().group_name(name).description("efa test").send().await.expect("CreateSecurityGroup");
    out.group_id().expect("group id").to_string()
}

/// Whether moto's group `sg` holds the all-traffic rule with itself as the peer, (in, out).
async fn self_rules(c: &aws_sdk_ec2::Client, sg: &str) -> (bool, bool) {
    let out = c.describe_security_groups().group_ids(sg).send().await.expect("DescribeSecurityGroups");
    let g = &out.security_groups()[0];
    let has = |rules: &[aws_sdk_ec2::types::IpPermission]| {
        rules
            .iter()
            .any(|r| r.ip_protocol() == Some("-1") && r.user_id_group_pairs().iter().any(|p| p.group_id() == Some(sg)))
    };
    (has(g.ip_permissions()), has(g.ip_permissions_egress()))
}

fn spec(endpoint: &str, sg: &str, desired: u32) -> String {
    format!(
        r#"provider "aws" {{
  region          = "us-east-2"
  endpoint        = "{endpoint}"
  image           = "ami-0123456789abcdef0"
  security_groups = ["{sg}"]
}}

gpu_pool "train" {{
  provider       = "aws"
  zones          = ["us-east-2a"]
  gpu            = "H200"
  gpus_per_node  = 8
  instance_types = ["p5e.48xlarge", "p5en.48xlarge"]
  nodes {{
    min     = 0
    desired = {desired}
    max     = 4
  }}
  network {{
    fabric = "efa"
  }}
}}
"#
    )
}

/// The interfaces of a `CreateLaunchTemplate`, in order, as (card, device, type, groups).
fn interfaces(call: &Request) -> Vec<(String, String, String, String)> {
    let p = &call.params;
    let at =
        |i: usize, k: &str| p.get(&format!("LaunchTemplateData.NetworkInterface.{i}.{k}")).cloned().unwrap_or_default();
    (1..)
        .take_while(|i| p.contains_key(&format!("LaunchTemplateData.NetworkInterface.{i}.DeviceIndex")))
        .map(|i| (at(i, "NetworkCardIndex"), at(i, "DeviceIndex"), at(i, "InterfaceType"), at(i, "SecurityGroupId.1")))
        .collect()
}

/// The instance types of each launch template config of a `CreateFleet`, by config.
fn fleet_configs(call: &Request) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in &call.params {
        if let Some(rest) = k.strip_prefix("LaunchTemplateConfigs.")
            && k.ends_with(".InstanceType")
        {
            out.entry(rest.split('.').next().unwrap().to_string()).or_default().push(v.clone());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_launches_efa_interfaces_per_type_and_opens_the_security_group_to_itself_once() {
    let c = client("us-east-2").await;
    let sg = security_group(&c, &format!("efa-{}", std::process::id())).await;
    assert_eq!(self_rules(&c, &sg).await, (false, false), "a new group lacks the rules");
    let front = FakeEc2::proxy(&moto());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), spec(&front.url, &sg, 2)).unwrap();

    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 0, "aws takes `fabric = \"efa\"`: {}\n{}", r.stdout, r.stderr);
    let r = run(dir, &["plan"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("fabric efa"), "the plan shows the batch's fabric:\n{}", r.stdout);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    // One template per interface count, the groups on the interfaces, none beside them.
    let mut templates: Vec<Vec<(String, String, String, String)>> =
        front.actions("CreateLaunchTemplate").iter().map(interfaces).collect();
    templates.sort_by_key(Vec::len);
    assert_eq!(templates.iter().map(Vec::len).collect::<Vec<_>>(), [16, 32], "p5en takes 16, p5e 32");
    for t in &templates {
        assert_eq!(t[0], ("0".into(), "0".into(), "efa".into(), sg.clone()), "{t:?}");
        for (i, (card, device, kind, group)) in t.iter().enumerate().skip(1) {
            assert_eq!((card.as_str(), device.as_str(), kind.as_str()), (i.to_string().as_str(), "1", "efa"));
            assert_eq!(group, &sg);
        }
    }
    for call in front.actions("CreateLaunchTemplate") {
        assert!(!call.params.keys().any(|k| k.starts_with("LaunchTemplateData.SecurityGroupId")), "{:?}", call.params);
    }
    let fleets = front.actions("CreateFleet");
    assert_eq!(fleets.len(), 1, "one fleet for the batch");
    let configs: Vec<Vec<String>> = fleet_configs(&fleets[0]).into_values().collect();
    assert_eq!(configs, [vec!["p5e.48xlarge".to_string()], vec!["p5en.48xlarge".to_string()]], "a config per count");

    // The group lets its members reach each other: one rule in, one out, before the nodes.
    let ingress = front.actions("AuthorizeSecurityGroupIngress");
    let egress = front.actions("AuthorizeSecurityGroupEgress");
    assert_eq!((ingress.len(), egress.len()), (1, 1));
    for call in ingress.iter().chain(&egress) {
        assert_eq!(call.params.get("GroupId"), Some(&sg));
        assert_eq!(call.params.get("IpPermissions.1.IpProtocol").map(String::as_str), Some("-1"));
        assert_eq!(call.params.get("IpPermissions.1.Groups.1.GroupId"), Some(&sg), "{:?}", call.params);
        assert!(call.at < fleets[0].at, "the rules first, then the nodes");
    }
    assert_eq!(self_rules(&c, &sg).await, (true, true), "moto holds both rules");
    let state: serde_json::Value = crate::state_plain::read(&dir.join("state/default.json"));
    assert_eq!(state["resources"]["gpu_pool.train"]["nodes"].as_array().unwrap().len(), 2, "{state:#}");

    // A settled pool sends nothing new; a scale-up finds the rules in place.
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    std::fs::write(dir.join("main.hcl"), spec(&front.url, &sg, 3)).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let writes = |a: &str| front.actions(a).len();
    assert_eq!(writes("AuthorizeSecurityGroupIngress") + writes("AuthorizeSecurityGroupEgress"), 2, "no rule twice");
    assert_eq!(writes("CreateLaunchTemplate") + writes("CreateLaunchTemplateVersion"), 2, "the templates are reused");
    assert_eq!(writes("CreateFleet"), 2, "only the scale-up launches");

    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(writes("DeleteLaunchTemplate"), 2, "both templates go with the pool");
}

#[test]
fn validate_refuses_efa_on_a_type_without_it_and_without_security_groups() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let no_efa = spec("http://127.0.0.1:9", "sg-0abc", 1)
        .replace("gpu            = \"H200\"", "gpu            = \"A10G\"")
        .replace("gpus_per_node  = 8", "gpus_per_node  = 1")
        .replace(r#"["p5e.48xlarge", "p5en.48xlarge"]"#, r#"["g5.xlarge"]"#);
    std::fs::write(dir.join("main.hcl"), &no_efa).unwrap();
    let r = run(dir, &["validate"]);
    assert_ne!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("g5.xlarge does not have"), "{}", r.stderr);
    assert!(r.stderr.contains("main.hcl:13"), "located at the type: {}", r.stderr);

    let no_groups = spec("http://127.0.0.1:9", "sg-0abc", 1).replace("  security_groups = [\"sg-0abc\"]\n", "");
    std::fs::write(dir.join("main.hcl"), &no_groups).unwrap();
    let r = run(dir, &["validate"]);
    assert_ne!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("names no `security_groups`"), "{}", r.stderr);
    assert!(r.stderr.contains("main.hcl:19"), "located at `fabric`: {}", r.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_multi_node_job_s_nodes_launch_with_efa_interfaces_after_the_group_rules() {
    let c = client("us-east-2").await;
    let sg = security_group(&c, &format!("efa-job-{}", std::process::id())).await;
    let front = FakeEc2::proxy(&moto());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = spec(&front.url, &sg, 0)
        + "\njob_template \"ddp\" {\n  image   = \"ghcr.io/example/ddp:1\"\n  command = [\"torchrun\", \"train.py\"]\n  gpus    = 8\n  retries = 0\n}\n\n\
           job \"pretrain\" {\n  template = job_template.ddp\n  pool     = gpu_pool.train\n  replicas = 2\n}\n";
    std::fs::write(dir.join("main.hcl"), &spec).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    let launches = front.actions("RunInstances");
    assert_eq!(launches.len(), 2, "a node per replica");
    for call in &launches {
        let p = &call.params;
        let get = |k: &str| p.get(k).map(String::as_str);
        assert_eq!((get("SubnetId"), get("SecurityGroupId.1")), (None, None), "all on the interfaces: {p:?}");
        assert_eq!(get("InstanceType"), Some("p5e.48xlarge"), "{p:?}");
        let efa = (1..).take_while(|i| get(&format!("NetworkInterface.{i}.InterfaceType")) == Some("efa")).count();
        assert_eq!(efa, 32, "as many as p5e.48xlarge takes: {p:?}");
        assert_eq!(get("NetworkInterface.1.SecurityGroupId.1"), Some(sg.as_str()));
        assert!(get("NetworkInterface.1.SubnetId").is_some(), "{p:?}");
    }
    let rules = front.actions("AuthorizeSecurityGroupIngress");
    assert_eq!(rules.len(), 1, "the rules once, found in place by the second replica");
    assert!(rules[0].at < launches[0].at, "the rules first");
    assert_eq!(self_rules(&c, &sg).await, (true, true));

    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}
