//! A multi-node job on an aws pool against moto (docs/design/big-runs.md): each replica
//! gets a node made for it, all in the pool's first zone, and its user data carries the
//! rendezvous, replica 0's private address taken from EC2's answer to its launch.

use std::collections::BTreeMap;
use std::path::Path;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{Filter, InstanceAttributeName};
use base64::Engine;
use gpuplan::providers::aws::AwsSettings;

use crate::aws::cli::{lineage, pool_spec, run};

const REGION: &str = "us-east-2";

fn endpoint() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!(
            "GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`, which installs moto into .venv/ and starts it"
        ),
    }
}

async fn client() -> Client {
    let settings = AwsSettings {
        name: "aws".into(),
        endpoint: Some(endpoint()),
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        ..Default::default()
    };
    AwsSettings::client(&settings.load().await, REGION)
}

/// A job instance of `lineage`: (replica, zone, private address, user data).
struct JobNode {
    replica: String,
    zone: String,
    address: String,
    user_data: String,
}

async fn job_nodes(c: &Client, lineage: &str) -> Vec<JobNode> {
    let out = c
        .describe_instances()
        .filters(Filter::builder().name("tag:gpuplan:lineage").values(lineage).build())
        .filters(Filter::builder().name("tag-key").values("gpuplan:job").build())
        .send()
        .await
        .expect("DescribeInstances");
    let mut nodes = Vec::new();
    for i in out.reservations().iter().flat_map(|r| r.instances()) {
        let tags: BTreeMap<&str, &str> = i.tags().iter().filter_map(|t| Some((t.key()?, t.value()?))).collect();
        let id = i.instance_id().expect("an id");
        let attr = c
            .describe_instance_attribute()
            .instance_id(id)
            .attribute(InstanceAttributeName::UserData)
            .send()
            .await
            .expect("DescribeInstanceAttribute");
        let data = attr.user_data().and_then(|u| u.value()).unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD.decode(data).expect("base64");
        nodes.push(JobNode {
            replica: tags.get("gpuplan:replica").map(|r| r.to_string()).unwrap_or_default(),
            zone: i.placement().and_then(|p| p.availability_zone()).unwrap_or_default().to_string(),
            address: i.private_ip_address().unwrap_or_default().to_string(),
            user_data: String::from_utf8(bytes).expect("UTF-8"),
        });
    }
    nodes.sort_by(|a, b| a.replica.cmp(&b.replica));
    nodes
}

fn write_spec(dir: &Path, spec: &str) {
    std::fs::write(dir.join("main.hcl"), spec).expect("write spec");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_multi_node_job_s_replicas_launch_in_one_zone_on_replica_0_s_private_address() {
    let c = client().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool_spec(&endpoint(), REGION, &["us-east-2b", "us-east-2a"], 0, 0, 0, "")
        + "\njob_template \"ddp\" {\n  image   = \"ghcr.io/example/ddp:1\"\n  command = [\"torchrun\", \"train.py\"]\n  gpus    = 1\n  retries = 0\n}\n\n\
           job \"pretrain\" {\n  template = job_template.ddp\n  pool     = gpu_pool.train\n  replicas = 3\n}\n";
    write_spec(dir, &spec);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let lineage = lineage(dir);
    let nodes = job_nodes(&c, &lineage).await;
    assert_eq!(nodes.iter().map(|n| n.replica.as_str()).collect::<Vec<_>>(), ["0", "1", "2"]);
    assert!(nodes.iter().all(|n| n.zone == "us-east-2b"), "one zone, the pool's first");
    let master = &nodes[0].address;
    assert!(!master.is_empty(), "moto gives replica 0 a private address");
    for n in &nodes {
        let u = &n.user_data;
        assert!(u.contains("--network host"), "{u}");
        assert!(u.contains("-e GPUPLAN_NNODES=3") && u.contains("-e GPUPLAN_MASTER_PORT=29500"), "{u}");
        assert!(u.contains(&format!("-e GPUPLAN_NODE_RANK={}", n.replica)), "{u}");
    }
    // Replica 0 reads its own address; the others were launched with the one EC2 answered.
    assert!(nodes[0].user_data.contains("GPUPLAN_MASTER_ADDR=\"$(hostname -I"), "{}", nodes[0].user_data);
    for n in &nodes[1..] {
        assert!(n.user_data.contains(&format!("-e GPUPLAN_MASTER_ADDR={master}")), "{}", n.user_data);
    }
    // The state records it with replica 0's run.
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("state/default.json")).expect("state")).expect("JSON");
    let runs = state["resources"]["job.pretrain"]["job"]["runs"].as_array().expect("runs");
    let first = runs.iter().find(|r| r["replica"] == 0).expect("replica 0's run");
    assert_eq!(first["address"].as_str(), Some(master.as_str()));

    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}
