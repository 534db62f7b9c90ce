//! The aws provider through the CLI against moto's EC2 server (started by
//! `scripts/test`, which exports GPUPLAN_TEST_MOTO_ENDPOINT). Without the endpoint these
//! tests fail: they are the provider's real integration tests, never skipped quietly.
//!
//! moto keeps one account for every test of the run, so each test works in its own
//! region and counts only instances carrying its own state's lineage.

use std::collections::BTreeMap;
use std::path::Path;

use crate::aws::cli::{lineage, pool_spec, run};
use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{Filter, InstanceStateName, InstanceType, ResourceType, Tag, TagSpecification};
use gpuplan::providers::aws::{AwsProvider, AwsSettings};
use gpuplan::providers::{ErrorClass, ListFilter, NodePort, PricePort};

fn endpoint() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!(
            "GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`, which installs moto into .venv/ and starts it"
        ),
    }
}

/// An SDK client on moto, built the way the provider builds its own.
async fn client(region: &str) -> Client {
    let sdk = settings().load().await;
    AwsSettings::client(&sdk, region)
}

fn settings() -> AwsSettings {
    AwsSettings {
        name: "aws".into(),
        endpoint: Some(endpoint()),
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        ..Default::default()
    }
}

/// Live instances carrying `lineage`, as (id, lifecycle, tags).
async fn tagged(c: &Client, lineage: &str) -> Vec<(String, String, BTreeMap<String, String>)> {
    let out = c
        .describe_instances()
        .filters(Filter::builder().name("tag:gpuplan:lineage").values(lineage).build())
        .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
        .max_results(1000)
        .send()
        .await
        .expect("DescribeInstances");
    let mut v = Vec::new();
    for r in out.reservations() {
        for i in r.instances() {
            let tags =
                i.tags().iter().map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string())).collect();
            let life = i.instance_lifecycle().map(|l| l.as_str().to_string()).unwrap_or_else(|| "on-demand".into());
            v.push((i.instance_id().unwrap().to_string(), life, tags));
        }
    }
    v
}

/// An instance gpuplan does not own, in the same region.
async fn foreign_instance(c: &Client) -> String {
    let out = c
        .run_instances()
        .image_id("ami-0123456789abcdef0")
        .instance_type(InstanceType::G5Xlarge)
        .min_count(1)
        .max_count(1)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(Tag::builder().key("team").value("someone-else").build())
                .build(),
        )
        .send()
        .await
        .expect("RunInstances");
    out.instances()[0].instance_id().unwrap().to_string()
}

async fn state_of(c: &Client, id: &str) -> InstanceStateName {
    let out = c.describe_instances().instance_ids(id).send().await.expect("DescribeInstances by id");
    out.reservations()[0].instances()[0].state().unwrap().name().unwrap().clone()
}

fn write_spec(dir: &Path, spec: &str) {
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn mixed_pool_lifecycle_apply_noop_drift_replace_destroy() {
    let region = "us-west-2";
    let c = client(region).await;
    let foreign = foreign_instance(&c).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // 5 nodes: 1 on-demand base, 50 % of the other 4 on spot → 3 on-demand, 2 spot.
    write_spec(dir, &pool_spec(&endpoint(), region, &["us-west-2a", "us-west-2b"], 5, 1, 50, ""));

    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let lineage = lineage(dir);
    let nodes = tagged(&c, &lineage).await;
    assert_eq!(nodes.len(), 5, "{nodes:?}");
    assert_eq!(nodes.iter().filter(|n| n.1 == "spot").count(), 2, "{nodes:?}");
    assert_eq!(nodes.iter().filter(|n| n.1 == "on-demand").count(), 3, "{nodes:?}");
    for (id, _, tags) in &nodes {
        assert_eq!(tags.get("gpuplan:managed").map(String::as_str), Some("true"), "{id}: {tags:?}");
        assert_eq!(tags.get("gpuplan:address").map(String::as_str), Some("gpu_pool.train"), "{id}");
        assert_eq!(tags.get("gpuplan:provider").map(String::as_str), Some("aws"), "{id}");
        assert_eq!(tags.get("team").map(String::as_str), Some("ml"), "labels become tags: {id}");
    }

    // Nothing to do afterwards.
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "plan after apply must be a no-op:\n{}\n{}", r.stdout, r.stderr);

    // Terminated behind gpuplan's back: drift, then apply replaces it.
    let victim = nodes[0].0.clone();
    c.terminate_instances().instance_ids(&victim).send().await.expect("TerminateInstances");
    let r = run(dir, &["drift", "--detailed-exitcode"]);
    assert_eq!(r.code, 2, "drift:\n{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains(&victim) || r.stderr.contains(&victim), "{}\n{}", r.stdout, r.stderr);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply after drift:\n{}\n{}", r.stdout, r.stderr);
    let after = tagged(&c, &lineage).await;
    assert_eq!(after.len(), 5, "{after:?}");
    assert!(!after.iter().any(|n| n.0 == victim));
    assert_eq!(after.iter().filter(|n| n.1 == "spot").count(), 2, "{after:?}");
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "no-op again:\n{}\n{}", r.stdout, r.stderr);

    // Destroy leaves nothing tagged, and never touches the foreign instance.
    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "destroy:\n{}\n{}", r.stdout, r.stderr);
    assert!(tagged(&c, &lineage).await.is_empty());
    assert_eq!(state_of(&c, &foreign).await, InstanceStateName::Running);
    // The pool's launch template went with its last node.
    let name = format!(
        "gpuplan-{}-gpu_pool.train",
        lineage.chars().filter(|c| c.is_ascii_alphanumeric()).take(8).collect::<String>()
    );
    let lts = c
        .describe_launch_templates()
        .filters(Filter::builder().name("launch-template-name").values(&name).build())
        .send()
        .await
        .expect("DescribeLaunchTemplates");
    assert!(lts.launch_templates().is_empty(), "{name}: {lts:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn terminate_refuses_an_untagged_instance_and_touches_nothing() {
    let region = "eu-central-1";
    let c = client(region).await;
    let foreign = foreign_instance(&c).await;
    let p = AwsProvider::new(settings());
    let err = p.terminate_nodes(region, std::slice::from_ref(&foreign)).await.unwrap_err();
    assert_eq!(err.class, ErrorClass::Invalid, "{err}");
    assert!(err.message.contains("lacks the tag gpuplan:managed=true"), "{err}");
    assert_eq!(state_of(&c, &foreign).await, InstanceStateName::Running);
    // Refresh never reports it either.
    let listed = p.list_nodes(&ListFilter { region: region.into(), lineage: None }).await.unwrap();
    assert!(!listed.iter().any(|n| n.id == foreign), "{listed:?}");
    assert_eq!(p.calls().get("TerminateInstances"), None, "no terminate call was made");
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_never_reach_state_plan_files_or_output() {
    let region = "ap-northeast-1";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let secret = "SECRETgpuplan/Zq9+never-print";
    let extra = format!("  access_key = \"AKIAGPUPLANSPEC\"\n  secret_key = \"{secret}\"\n");
    write_spec(dir, &pool_spec(&endpoint(), region, &["ap-northeast-1a"], 1, 1, 0, &extra));
    let mut outputs = Vec::new();
    for args in [
        &["apply", "--auto-approve"][..],
        &["plan", "--out", "saved.plan"],
        &["plan", "--json"],
        &["state", "show", "gpu_pool.train"],
        &["destroy", "--auto-approve"],
    ] {
        let r = run(dir, args);
        assert!(r.code == 0 || r.code == 2, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
        outputs.push(r.stdout);
        outputs.push(r.stderr);
    }
    for o in &outputs {
        assert!(!o.contains(secret), "secret printed:\n{o}");
    }
    // The plan file is compressed: search its JSON, read as `gpuplan` reads it.
    let mut saved = String::new();
    std::io::Read::read_to_string(&mut gpuplan::engine::planfile::open(&dir.join("saved.plan")).unwrap(), &mut saved)
        .unwrap();
    assert!(saved.contains("gpu_pool.train"), "the saved plan was not read: {saved}");
    let mut files = vec![(dir.join("saved.plan"), saved)];
    for e in std::fs::read_dir(dir.join("state")).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        files.push((path, text));
    }
    for (f, text) in files {
        assert!(!text.contains(secret), "secret in {}", f.display());
        assert!(!text.contains("AKIAGPUPLANSPEC"), "access key in {}", f.display());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stale_spot_prices_from_the_api_are_refused_for_the_catalog_estimate() {
    let p = AwsProvider::new(settings());
    let offers = p.offers("A10G", Some("us-east-1")).await.unwrap();
    let spot: Vec<_> = offers.iter().filter(|o| o.capacity == gpuplan::providers::Capacity::Spot).collect();
    // moto answers DescribeSpotPriceHistory with 0.00001 USD dated 2006: not the price in
    // force, so every spot offer keeps the catalog's estimate (and a warning says why).
    assert!(!spot.is_empty() && spot.iter().all(|o| !o.live_price), "{offers:?}");
    let cat = gpuplan::catalog::catalog();
    for o in &spot {
        let t = cat.instance_type(gpuplan::model::ProviderKind::Aws, &o.instance_type).unwrap();
        assert!((o.price_usd - t.spot_price_usd(gpuplan::catalog::DEFAULT_CNY_PER_USD)).abs() < 1e-9, "{o:?}");
    }
    // Cached for the run: asking again makes no new call.
    let before = p.total_calls();
    p.offers("A10G", Some("us-east-1")).await.unwrap();
    assert_eq!(p.total_calls(), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mixed_pool_over_two_zones_and_two_types_is_one_fleet_per_capacity_type() {
    let region = "us-east-2";
    let c = client(region).await;
    // Every call of the apply crosses this proxy on its way to moto, and is counted there.
    // Reads that do not depend on each other are made together: for a pool the state has
    // no record of, the type check, the subnet look-up and the template's look-up do not
    // depend on the refresh either. The proxy holds each answer of these five reads until
    // all five have arrived (at most 20 s each), so the log shows the overlaps and the
    // round trips.
    const TOGETHER: [&str; 5] = [
        "DescribeInstances",
        "DescribeSpotPriceHistory",
        "DescribeInstanceTypes",
        "DescribeSubnets",
        "DescribeLaunchTemplates",
    ];
    let proxy =
        crate::aws::fake_ec2::FakeEc2::proxy_holding(&endpoint(), std::time::Duration::from_secs(20), |req, log| {
            let seen = |a: &str| log.iter().any(|r| r.action == a);
            !TOGETHER.contains(&req.action.as_str()) || TOGETHER.iter().all(|a| seen(a))
        });
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // 6 nodes: 1 on-demand base, 60 % of the other 5 on spot → 3 on-demand, 3 spot.
    let spec_at = |url: &str| {
        pool_spec(url, region, &["us-east-2a", "us-east-2b"], 6, 1, 60, "")
            .replace("instance_types = [\"g5.xlarge\"]", "instance_types = [\"g5.xlarge\", \"g5.2xlarge\"]")
    };

    // A plan only shows (or saves) what an apply may do later: it reads nothing ahead.
    let plain = crate::aws::fake_ec2::FakeEc2::proxy(&endpoint());
    write_spec(dir, &spec_at(&plain.url));
    let r = run(dir, &["plan"]);
    assert_eq!(r.code, 0, "plan:\n{}\n{}", r.stdout, r.stderr);
    let mut planned: Vec<String> = plain.requests().into_iter().map(|q| q.action).collect();
    planned.sort();
    assert_eq!(planned, ["DescribeInstances", "DescribeSpotPriceHistory"], "a plan's calls");

    write_spec(dir, &spec_at(&proxy.url));
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let calls = proxy.requests();
    let actions: Vec<&str> = calls.iter().map(|q| q.action.as_str()).collect();
    assert!(calls.len() <= 8, "{} calls: {actions:?}", calls.len());
    let first = |a: &str| calls.iter().find(|q| q.action == a).unwrap_or_else(|| panic!("no {a}: {actions:?}"));
    let overlap = |held: &str, asked: &str| {
        let answered = first(held).answered.expect("answered");
        assert!(first(asked).at < answered, "{asked} was made only after {held} was answered: {actions:?}");
    };
    overlap("DescribeInstances", "DescribeSpotPriceHistory");
    overlap("DescribeInstances", "DescribeInstanceTypes");
    overlap("DescribeInstances", "DescribeSubnets");
    overlap("DescribeInstances", "DescribeLaunchTemplates");
    // The template is made only after the types were checked.
    assert!(first("CreateLaunchTemplate").at > first("DescribeInstanceTypes").answered.expect("answered"));
    // Four round trips in all: the reads together, then the template (it needs the type
    // check), then the fleets (they need the template), which the executor runs in turn
    // (its fallback reads each answer).
    let trips = crate::aws::fake_ec2::round_trips(&calls);
    assert_eq!(
        trips,
        [
            vec![
                "DescribeInstanceTypes",
                "DescribeInstances",
                "DescribeLaunchTemplates",
                "DescribeSpotPriceHistory",
                "DescribeSubnets"
            ],
            vec!["CreateLaunchTemplate"],
            vec!["CreateFleet"],
            vec!["CreateFleet"],
        ],
        "{actions:?}"
    );
    let fleets = proxy.actions("CreateFleet");
    assert_eq!(fleets.len(), 2, "one fleet per capacity type: {actions:?}");
    for f in &fleets {
        let p = |k: &str| f.params.get(k).map(String::as_str);
        let spot = p("TargetCapacitySpecification.DefaultTargetCapacityType") == Some("spot");
        assert_eq!(p("TargetCapacitySpecification.TotalTargetCapacity"), Some("3"), "{:?}", f.params);
        let strategy = if spot { p("SpotOptions.AllocationStrategy") } else { p("OnDemandOptions.AllocationStrategy") };
        assert_eq!(strategy, Some(if spot { "price-capacity-optimized" } else { "prioritized" }));
        // Every allowed type in every allowed zone's subnet.
        let mut pools: Vec<(&str, &str)> = (1..=8)
            .filter_map(|i| {
                let o = format!("LaunchTemplateConfigs.1.Overrides.{i}");
                Some((p(&format!("{o}.InstanceType"))?, p(&format!("{o}.SubnetId"))?))
            })
            .collect();
        pools.sort();
        pools.dedup();
        assert_eq!(pools.len(), 4, "2 types × 2 subnets: {pools:?}");
    }

    let lineage = lineage(dir);
    let nodes = tagged(&c, &lineage).await;
    assert_eq!(nodes.len(), 6, "{nodes:?}");
    assert_eq!(nodes.iter().filter(|n| n.1 == "spot").count(), 3, "{nodes:?}");
    assert_eq!(nodes.iter().filter(|n| n.1 == "on-demand").count(), 3, "{nodes:?}");
    for (id, _, tags) in &nodes {
        assert_eq!(tags.get("gpuplan:managed").map(String::as_str), Some("true"), "{id}: {tags:?}");
        assert_eq!(tags.get("gpuplan:lineage"), Some(&lineage), "{id}");
        assert_eq!(tags.get("gpuplan:address").map(String::as_str), Some("gpu_pool.train"), "{id}");
        assert_eq!(tags.get("team").map(String::as_str), Some("ml"), "{id}");
    }

    // Wherever EC2 put the nodes among the allowed zones, the next plan keeps them.
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "plan after apply must be a no-op:\n{}\n{}", r.stdout, r.stderr);
    // An apply of a pool the state records reads nothing ahead: the refresh, prices and
    // the GPU health read's one look at the nodes' SSM agents (moto answers it 500: the
    // read is left out, asked once).
    let before = proxy.requests().len();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "no-op apply:\n{}\n{}", r.stdout, r.stderr);
    let named = |q: crate::aws::fake_ec2::Request| match q.action.as_str() {
        "" => q.headers.get("x-amz-target").cloned().unwrap_or_default(),
        _ => q.action,
    };
    let mut again: Vec<String> = proxy.requests().into_iter().skip(before).map(named).collect();
    again.sort();
    assert_eq!(
        again,
        ["AmazonSSM.DescribeInstanceInformation", "DescribeInstances", "DescribeSpotPriceHistory"],
        "a no-op apply's calls"
    );
    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "destroy:\n{}\n{}", r.stdout, r.stderr);
    assert!(tagged(&c, &lineage).await.is_empty());
}

/// A no-op plan reads the cloud once: one `DescribeInstances` (one page, filtered by the
/// state's lineage tag alone) and one `DescribeSpotPriceHistory`, asked while the
/// `DescribeInstances` is in flight, and the GPU health read's one
/// `DescribeInstanceInformation`; no type, zone, subnet or template look-ups. An
/// instance that carries the lineage but not `gpuplan:managed=true` is still not the
/// pool's (the managed tag is checked on gpuplan's side), so the plan stays a no-op.
#[tokio::test(flavor = "multi_thread")]
async fn a_no_op_plan_lists_the_pool_once_and_asks_prices_while_it_lists() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let region = "eu-west-1";
    let c = client(region).await;
    // The proxy holds each DescribeInstances answer until a DescribeSpotPriceHistory of
    // the same command has arrived (at most 20 s): only a plan that asks both at once is
    // answered at once, and the log then shows the price call made before the answer.
    let since = Arc::new(AtomicUsize::new(0));
    let from = since.clone();
    let proxy = crate::aws::fake_ec2::FakeEc2::proxy_holding(
        &endpoint(),
        std::time::Duration::from_secs(20),
        move |req, log| {
            req.action != "DescribeInstances"
                || log.iter().skip(from.load(Ordering::SeqCst)).any(|r| r.action == "DescribeSpotPriceHistory")
        },
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_spec(dir, &pool_spec(&proxy.url, region, &["eu-west-1a", "eu-west-1b"], 4, 0, 50, ""));
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let lineage = lineage(dir);
    assert_eq!(tagged(&c, &lineage).await.len(), 4);
    // Someone copies gpuplan's lineage and address tags onto an instance of their own.
    c.run_instances()
        .image_id("ami-0123456789abcdef0")
        .instance_type(InstanceType::G5Xlarge)
        .min_count(1)
        .max_count(1)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(Tag::builder().key("gpuplan:lineage").value(&lineage).build())
                .tags(Tag::builder().key("gpuplan:address").value("gpu_pool.train").build())
                .build(),
        )
        .send()
        .await
        .expect("RunInstances");

    let before = proxy.requests().len();
    since.store(before, Ordering::SeqCst);
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "a no-op plan:\n{}\n{}", r.stdout, r.stderr);
    let calls = proxy.requests()[before..].to_vec();
    // Besides EC2's two reads, the GPU health read's one look at the nodes' SSM agents
    // (moto answers it 500: the read is left out and not retried).
    let mut actions: Vec<&str> = calls
        .iter()
        .map(|q| if q.action.is_empty() { q.headers.get("x-amz-target").map_or("", String::as_str) } else { &q.action })
        .collect();
    actions.sort();
    assert_eq!(
        actions,
        ["AmazonSSM.DescribeInstanceInformation", "DescribeInstances", "DescribeSpotPriceHistory"],
        "{actions:?}"
    );
    let list = calls.iter().find(|q| q.action == "DescribeInstances").expect("the refresh");
    let prices = calls.iter().find(|q| q.action == "DescribeSpotPriceHistory").expect("the prices");
    let p = |k: &str| list.params.get(k).map(String::as_str);
    assert_eq!(p("Filter.1.Name"), Some("tag:gpuplan:lineage"), "{:?}", list.params);
    assert_eq!(p("Filter.1.Value.1"), Some(lineage.as_str()), "{:?}", list.params);
    assert_eq!(p("Filter.2.Name"), None, "one filter: {:?}", list.params);
    assert_eq!(p("MaxResults"), Some("1000"), "{:?}", list.params);
    let answered = list.answered.expect("the refresh was answered");
    assert!(prices.at < answered, "the prices were asked only after the refresh was answered");

    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "destroy:\n{}\n{}", r.stdout, r.stderr);
    assert!(tagged(&c, &lineage).await.iter().all(|n| !n.2.contains_key("gpuplan:managed")));
}

/// A pool in an EKS cluster (`kubernetes { kubeconfig, service_cidr }`): its nodes boot
/// with nodeadm's join config, one launch template per capacity (the labels differ), and
/// destroy removes both templates.
#[tokio::test(flavor = "multi_thread")]
async fn eks_pool_nodes_boot_with_nodeadm_join_config() {
    use base64::Engine as _;
    let region = "eu-west-1";
    let c = client(region).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool_spec(&endpoint(), region, &["eu-west-1a"], 2, 1, 100, "").replace(
        "  labels = { team = \"ml\" }\n}",
        "  labels = { team = \"ml\" }\n  kubernetes {\n    kubeconfig   = \"kube/config\"\n    namespace    = \"ml\"\n    service_cidr = \"10.100.0.0/16\"\n  }\n}",
    );
    assert!(spec.contains("service_cidr"), "{spec}");
    write_spec(dir, &spec);
    std::fs::create_dir(dir.join("kube")).unwrap();
    std::fs::write(
        dir.join("kube/config"),
        "apiVersion: v1\nkind: Config\ncurrent-context: gpu\nclusters:\n\
         - name: arn:aws:eks:eu-west-1:111122223333:cluster/gpu-prod\n  cluster:\n    server: https://ABC.gr7.eu-west-1.eks.amazonaws.com\n    certificate-authority-data: Q0EtREFUQQ==\n\
         contexts:\n- name: gpu\n  context:\n    cluster: arn:aws:eks:eu-west-1:111122223333:cluster/gpu-prod\n    user: eks\n\
         users:\n- name: eks\n  user:\n    token: unused\n",
    )
    .unwrap();

    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let lineage = lineage(dir);
    let nodes = tagged(&c, &lineage).await;
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    let prefix = format!(
        "gpuplan-{}-gpu_pool.train",
        lineage.chars().filter(|c| c.is_ascii_alphanumeric()).take(8).collect::<String>()
    );
    let user_data = |capacity: &'static str| {
        let c = c.clone();
        let name = format!("{prefix}.{capacity}");
        async move {
            let out = c
                .describe_launch_template_versions()
                .launch_template_name(&name)
                .versions("$Latest")
                .send()
                .await
                .unwrap_or_else(|e| panic!("{name}: {e:?}"));
            let data = out.launch_template_versions()[0]
                .launch_template_data()
                .and_then(|d| d.user_data())
                .unwrap_or_default();
            String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data).expect("base64")).expect("UTF-8")
        }
    };
    let spot = user_data("spot").await;
    for needle in [
        "Content-Type: application/node.eks.aws",
        "kind: NodeConfig",
        "name: gpu-prod",
        "apiServerEndpoint: https://ABC.gr7.eu-west-1.eks.amazonaws.com",
        "certificateAuthority: Q0EtREFUQQ==",
        "cidr: 10.100.0.0/16",
        "--node-labels=gpuplan.dev/pool=train,gpuplan.dev/capacity=spot",
        "--register-with-taints=gpuplan.dev/capacity=spot:NoSchedule",
    ] {
        assert!(spot.contains(needle), "missing {needle:?} in\n{spot}");
    }
    let on_demand = user_data("on-demand").await;
    assert!(on_demand.contains("--node-labels=gpuplan.dev/pool=train,gpuplan.dev/capacity=on-demand"), "{on_demand}");
    assert!(!on_demand.contains("register-with-taints"), "{on_demand}");

    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "destroy:\n{}\n{}", r.stdout, r.stderr);
    for capacity in ["spot", "on-demand"] {
        let name = format!("{prefix}.{capacity}");
        let lts = c
            .describe_launch_templates()
            .filters(Filter::builder().name("launch-template-name").values(&name).build())
            .send()
            .await
            .expect("DescribeLaunchTemplates");
        assert!(lts.launch_templates().is_empty(), "{name} outlived its pool: {lts:?}");
    }
}

/// `disk {}` on AWS: the pool's launch template maps the root disk on the image's own root
/// device (moto's Ubuntu AMI: `/dev/sda1`) and data disks from `/dev/sdf`, gp3 by
/// default, deleted with the instance (docs/design/big-runs.md).
#[tokio::test(flavor = "multi_thread")]
async fn disks_go_into_the_launch_template_on_the_image_s_root_device() {
    let region = "us-east-1";
    let c = client(region).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool_spec(&endpoint(), region, &["us-east-1a"], 1, 1, 0, "")
        .replace("ami-0123456789abcdef0", "ami-1e749f67")
        .replace("  labels = { team = \"ml\" }\n}", "  labels = { team = \"ml\" }\n  disk {\n    size_gb = 500\n    data    = [{ size_gb = 2000, type = \"io2\" }]\n  }\n}");
    assert!(spec.contains("size_gb = 500"), "{spec}");
    write_spec(dir, &spec);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("disks root 500 GB gp3, data 2000 GB io2"), "{}", r.stdout);
    let lineage = lineage(dir);
    assert_eq!(tagged(&c, &lineage).await.len(), 1);
    let name = format!(
        "gpuplan-{}-gpu_pool.train",
        lineage.chars().filter(|c| c.is_ascii_alphanumeric()).take(8).collect::<String>()
    );
    let out = c
        .describe_launch_template_versions()
        .launch_template_name(&name)
        .versions("$Latest")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let data = out.launch_template_versions()[0].launch_template_data().expect("template data");
    let maps: Vec<(String, i32, String, bool)> = data
        .block_device_mappings()
        .iter()
        .map(|m| {
            let ebs = m.ebs().expect("an EBS mapping");
            (
                m.device_name().unwrap_or_default().to_string(),
                ebs.volume_size().unwrap_or_default(),
                ebs.volume_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
                ebs.delete_on_termination().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        maps,
        vec![
            ("/dev/sda1".to_string(), 500, "gp3".to_string(), true),
            ("/dev/sdf".to_string(), 2000, "io2".to_string(), true)
        ]
    );
    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "destroy:\n{}\n{}", r.stdout, r.stderr);
}

/// `gpuplan offers` asks the spec's aws provider: moto's stale spot price is refused with
/// a warning naming its date, and the rows say they are the catalog's, dated.
#[test]
fn offers_ask_the_spec_provider_and_refuse_a_stale_spot_price() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_spec(dir, &pool_spec(&endpoint(), "us-east-1", &["us-east-1a"], 1, 1, 0, ""));
    let r = run(dir, &["offers", "--gpu", "A10G", "--provider", "aws", "--region", "us-east-1", "--spot"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("a price dated 2006"), "the stale answer is named: {}", r.stderr);
    let row = r.stdout.lines().find(|l| l.contains("g5.xlarge ")).expect("a g5.xlarge row");
    assert!(row.contains("catalog 2026-09-24") && !row.contains("live"), "{row}");
}

/// A job on a desired=0 AWS pool boots one instance tagged as the job's and the pool's;
/// when it ends (stopped behind gpuplan's back here) `reconcile --once` terminates the
/// instance, and nothing of the job outlives `destroy`.
#[tokio::test(flavor = "multi_thread")]
async fn an_ended_job_s_instance_is_terminated_within_one_reconcile_pass() {
    let region = "ap-northeast-1";
    let c = client(region).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The job prints its exit line on the console (moto's own console is a fixed sample).
    let console = std::sync::Arc::new(std::sync::Mutex::new(Some("boot\ngpuplan-job-exit=0\n".to_string())));
    let proxy = crate::aws::fake_ec2::console_proxy(&endpoint(), console);
    let spec = pool_spec(&proxy.url, region, &["ap-northeast-1a"], 0, 0, 0, "")
        + "\njob_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    write_spec(dir, &spec);
    // The plan counts the job's node in the pool's cost, though the pool keeps no warm node.
    let r = run(dir, &["plan", "--json"]);
    assert_eq!(r.code, 0, "plan:\n{}", r.stderr);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let pool = &plan["cost"]["pools"][0];
    assert_eq!((pool["on_demand_after"].as_u64(), pool["gpus_after"].as_u64()), (Some(1), Some(1)), "{pool:#}");
    assert_eq!(pool["hourly_after"], pool["on_demand_price"]["usd_per_hour"], "{pool:#}");
    assert_eq!(plan["cost"]["hourly_after"], pool["hourly_after"]);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let lineage = lineage(dir);
    let all = tagged(&c, &lineage).await;
    let jobs: Vec<_> = all.iter().filter(|n| n.2.contains_key("gpuplan:job")).collect();
    assert_eq!(jobs.len(), 1, "exactly one instance, for the job: {all:?}");
    let (id, _, tags) = jobs[0];
    assert_eq!(tags.get("gpuplan:job").map(String::as_str), Some("job.once"));
    assert_eq!(tags.get("gpuplan:address").map(String::as_str), Some("gpu_pool.train"));
    // The job's node is in the spend ledger, charged to the job, while it runs.
    let spend = |dir: &Path| {
        let r = run(dir, &["cost", "--json"]);
        assert_eq!(r.code, 0, "cost:\n{}", r.stderr);
        serde_json::from_str::<serde_json::Value>(&r.stdout).expect("JSON")["spend"].clone()
    };
    let s = spend(dir);
    assert_eq!(s["open_nodes"], 1, "{s:#}");
    assert!(s["by_job"]["job.once"].is_number(), "{s:#}");

    // The job ends: its node powers off.
    c.stop_instances().instance_ids(id).send().await.expect("StopInstances");
    let r = run(dir, &["reconcile", "--once"]);
    assert!(r.code == 0 || r.code == 2, "reconcile:\n{}\n{}", r.stdout, r.stderr);
    assert_eq!(state_of(&c, id).await, InstanceStateName::Terminated, "{}\n{}", r.stdout, r.stderr);
    let r = run(dir, &["jobs", "status", "once", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert_ne!(doc["jobs"][0]["state"], "running", "{doc:#}");
    assert_eq!(doc["jobs"][0]["runs"][0]["node_released"], true, "{doc:#}");
    assert!(doc["jobs"][0]["cost_usd"].is_number(), "{doc:#}");
    assert_eq!(spend(dir)["open_nodes"], 0, "the ended run's line is closed");
    // Nothing more to do, and nothing left after destroy.
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(tagged(&c, &lineage).await.is_empty());
}

/// A job node whose run the state no longer has (`state rm` of the job) is drift: the
/// plan reports it and apply terminates it.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_node_no_run_owns_is_drift_and_terminated() {
    let region = "eu-central-1";
    let c = client(region).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool_spec(&endpoint(), region, &["eu-central-1a"], 0, 0, 0, "")
        + "\njob_template \"t\" {\n  image = \"nginx\"\n  gpus  = 1\n}\n\njob \"orphaned\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    write_spec(dir, &spec);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let lineage = lineage(dir);
    let jobs: Vec<_> = tagged(&c, &lineage).await.into_iter().filter(|n| n.2.contains_key("gpuplan:job")).collect();
    assert_eq!(jobs.len(), 1);
    let id = jobs[0].0.clone();

    // The state forgets the job, and the spec no longer has it.
    let r = run(dir, &["state", "rm", "job.orphaned"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let without_job = pool_spec(&endpoint(), region, &["eu-central-1a"], 0, 0, 0, "")
        + "\njob_template \"t\" {\n  image = \"nginx\"\n  gpus  = 1\n}\n";
    write_spec(dir, &without_job);
    let r = run(dir, &["plan", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let drift = plan["drift"].as_array().unwrap();
    assert!(drift.iter().any(|d| d["node_id"] == id.as_str() && d["kind"] == "orphan"), "{drift:#?}");
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(state_of(&c, &id).await, InstanceStateName::Terminated);
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "nothing left: {}\n{}", r.stdout, r.stderr);
}

/// A front for moto that answers SSM's `DescribeInstanceInformation` itself (moto answers
/// it 500): every instance asked about is `Online` while `online` holds, else
/// `ConnectionLost`. Every other call, EC2's and SSM's, goes to moto.
fn agents_front(online: std::sync::Arc<std::sync::Mutex<bool>>) -> crate::aws::fake_ec2::FakeEc2 {
    use crate::aws::fake_ec2::{FakeEc2, Reply, forward};
    let host = endpoint().trim_start_matches("http://").trim_end_matches('/').to_string();
    FakeEc2::start(move |req, _| {
        if req.headers.get("x-amz-target").map(String::as_str) != Some("AmazonSSM.DescribeInstanceInformation") {
            return forward(&host, req);
        }
        let asked: serde_json::Value = serde_json::from_str(&req.body).expect("a JSON request");
        let ping = if *online.lock().unwrap() { "Online" } else { "ConnectionLost" };
        let ids = asked["Filters"][0]["Values"].as_array().cloned().unwrap_or_default();
        let list: Vec<serde_json::Value> =
            ids.iter().map(|id| serde_json::json!({"InstanceId": id, "PingStatus": ping})).collect();
        Reply { status: 200, body: serde_json::json!({"InstanceInformationList": list}).to_string() }
    })
}

/// SSM calls the front saw, by action.
fn ssm_calls(front: &crate::aws::fake_ec2::FakeEc2, action: &str) -> usize {
    let target = format!("AmazonSSM.{action}");
    front.requests().iter().filter(|r| r.headers.get("x-amz-target") == Some(&target)).count()
}

/// Warm nodes take jobs: on a pool with two idle warm nodes, a one-replica job runs on
/// one of them through Systems Manager Run Command (moto's `SendCommand` and
/// `GetCommandInvocation`), launching no instance; when it ends the node stays in the
/// pool. A node whose SSM agent is offline is not warm: the plan says so and boots a node.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_runs_on_an_idle_warm_node_through_ssm_and_the_node_stays_in_its_pool() {
    let region = "us-east-1";
    let c = client(region).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let online = std::sync::Arc::new(std::sync::Mutex::new(false));
    let front = agents_front(online.clone());
    let pool = pool_spec(&front.url, region, &["us-east-1a"], 2, 0, 0, "");
    write_spec(dir, &pool);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let lineage = lineage(dir);
    let warm: Vec<String> = tagged(&c, &lineage).await.into_iter().map(|n| n.0).collect();
    assert_eq!(warm.len(), 2, "{warm:?}");

    let job = "\njob_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    write_spec(dir, &(pool.clone() + job));
    // Agents offline: the nodes are not warm for jobs, and the plan says why.
    // The details (why warm nodes were passed over) are in the verbose view.
    let r = run(dir, &["plan", "--no-color", "--verbose"]);
    assert_eq!(r.code, 0, "plan:\n{}\n{}", r.stdout, r.stderr);
    let text = r.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("(on-demand): boots a node"), "{text}");
    assert!(text.contains("warm nodes that take no jobs: "), "{text}");
    assert!(text.contains(": SSM agent ConnectionLost"), "{text}");
    assert!(warm.iter().all(|id| text.contains(id.as_str())), "both nodes named: {text}");

    *online.lock().unwrap() = true;
    let r = run(dir, &["plan", "--json"]);
    assert_eq!(r.code, 0, "plan:\n{}", r.stderr);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let launch = &plan["jobs"][0]["launches"][0];
    let node = launch["warm_node"].as_str().expect("a warm node").to_string();
    assert!(warm.contains(&node), "{launch:#}");
    assert_eq!(launch["node_shape"], false, "{launch:#}");
    assert_eq!(plan["cost"]["pools"][0]["on_demand_after"], 2, "no node added to the cost: {:#}", plan["cost"]);
    let r = run(dir, &["plan", "--no-color"]);
    let text = r.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains(&format!("on-demand): on warm node {node}")), "{text}");

    let launches_before = front.actions("RunInstances").len() + front.actions("CreateFleet").len();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    assert_eq!(front.actions("RunInstances").len() + front.actions("CreateFleet").len(), launches_before);
    // One job send; the plans' GPU health reads are commands of their own.
    let job_sends: Vec<_> = front
        .requests()
        .into_iter()
        .filter(|r| r.headers.get("x-amz-target").map(String::as_str) == Some("AmazonSSM.SendCommand"))
        .filter(|r| !r.body.contains("gpuplan health read"))
        .collect();
    assert_eq!(job_sends.len(), 1);
    let sent: serde_json::Value = serde_json::from_str(&job_sends[0].body).unwrap();
    assert_eq!(sent["InstanceIds"][0], node.as_str(), "{sent:#}");
    let script = sent["Parameters"]["commands"][0].as_str().unwrap_or("");
    assert!(script.contains("docker run") && script.contains("exit \"$code\"") && !script.contains("shutdown"));

    // moto answers the invocation Success: the job succeeded, read back through SSM.
    let r = run(dir, &["jobs", "status", "once", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert_eq!(doc["jobs"][0]["state"], "succeeded", "{doc:#}");
    assert!(ssm_calls(&front, "GetCommandInvocation") >= 1);
    let r = run(dir, &["jobs", "logs", "once"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // Recorded by the next apply; the warm node is still there, in its pool.
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let nodes: Vec<String> = tagged(&c, &lineage).await.into_iter().map(|n| n.0).collect();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert!(nodes.contains(&node));
    assert_eq!(state_of(&c, &node).await, InstanceStateName::Running);
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "nothing left to do: {}\n{}", r.stdout, r.stderr);
    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}

/// A front for moto for the boot check of job nodes: every SSM agent asked about is
/// `Online` (moto answers `DescribeInstanceInformation` 500), every instance's
/// `launchTime` is `age` seconds ago, and `GetCommandInvocation` answers with `output`
/// while it holds one (moto answers every command Success with empty output, so it cannot
/// say that a file is missing). Every other call goes to moto.
fn boot_front(
    age: std::sync::Arc<std::sync::Mutex<u64>>,
    output: std::sync::Arc<std::sync::Mutex<Option<String>>>,
) -> crate::aws::fake_ec2::FakeEc2 {
    use crate::aws::fake_ec2::{FakeEc2, Reply, forward};
    let host = endpoint().trim_start_matches("http://").trim_end_matches('/').to_string();
    FakeEc2::start(move |req, _| {
        let target = req.headers.get("x-amz-target").map(String::as_str).unwrap_or("");
        let asked: serde_json::Value = serde_json::from_str(&req.body).unwrap_or_default();
        let answer = output.lock().unwrap().clone();
        match (target, answer) {
            ("AmazonSSM.DescribeInstanceInformation", _) => {
                let ids = asked["Filters"][0]["Values"].as_array().cloned().unwrap_or_default();
                let list: Vec<serde_json::Value> =
                    ids.iter().map(|id| serde_json::json!({"InstanceId": id, "PingStatus": "Online"})).collect();
                Reply { status: 200, body: serde_json::json!({"InstanceInformationList": list}).to_string() }
            }
            ("AmazonSSM.GetCommandInvocation", Some(out)) => {
                let doc = serde_json::json!({"CommandId": asked["CommandId"], "InstanceId": asked["InstanceId"],
                    "Status": "Success", "ResponseCode": 0, "StandardOutputContent": out});
                Reply { status: 200, body: doc.to_string() }
            }
            _ if req.action == "DescribeInstances" => {
                let mut reply = forward(&host, req);
                let then = std::time::SystemTime::now() - std::time::Duration::from_secs(*age.lock().unwrap());
                reply.body = with_launch_time(&reply.body, &humantime::format_rfc3339_seconds(then).to_string());
                reply
            }
            _ => forward(&host, req),
        }
    })
}

/// `body` (a DescribeInstances answer) with every `launchTime` set to `at`.
fn with_launch_time(body: &str, at: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some(start) = rest.find("<launchTime>") {
        let open = start + "<launchTime>".len();
        let Some(len) = rest[open..].find("</launchTime>") else { break };
        out += &rest[..open];
        out += at;
        rest = &rest[open + len..];
    }
    out + rest
}

/// A job node whose user data never ran does not bill until `max_runtime` + 15 minutes:
/// past the boot deadline (15 minutes after its launch) gpuplan asks the node's SSM agent
/// (Run Command) whether the job's log exists; an answer that it does not fails the run
/// ("never started", as on Tencent) and the next apply terminates the node. Before the
/// deadline nothing is asked, and an answer without the check's line (moto's empty
/// output) is no answer: the run stays running.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_node_whose_user_data_never_ran_fails_past_the_boot_deadline_through_ssm() {
    let region = "us-west-2";
    let c = client(region).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let age = std::sync::Arc::new(std::sync::Mutex::new(0));
    let output = std::sync::Arc::new(std::sync::Mutex::new(None));
    let front = boot_front(age.clone(), output.clone());
    let spec = pool_spec(&front.url, region, &["us-west-2a"], 0, 0, 0, "")
        + "\njob_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"lost\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    write_spec(dir, &spec);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let lineage = lineage(dir);
    let jobs: Vec<_> = tagged(&c, &lineage).await.into_iter().filter(|n| n.2.contains_key("gpuplan:job")).collect();
    assert_eq!(jobs.len(), 1);
    let id = jobs[0].0.clone();
    let state = || {
        let r = run(dir, &["jobs", "status", "lost", "--json"]);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
        (v["jobs"][0]["state"].as_str().unwrap_or("").to_string(), v["jobs"][0]["runs"][0]["message"].clone())
    };

    *age.lock().unwrap() = 10 * 60;
    assert_eq!(state().0, "running", "10 minutes after launch it may still boot");
    assert_eq!(ssm_calls(&front, "SendCommand"), 0, "no boot check before the deadline");

    *age.lock().unwrap() = 16 * 60;
    let (s, msg) = state();
    assert_eq!(s, "running", "moto's empty answer says nothing: {msg}");
    assert!(ssm_calls(&front, "SendCommand") >= 1);
    let sent = front.requests().into_iter().rev().find(|r| r.body.contains("AWS-RunShellScript")).unwrap();
    assert!(sent.body.contains(&id) && sent.body.contains("/var/log/gpuplan-job.log"), "{}", sent.body);

    *output.lock().unwrap() = Some("gpuplan-job-log=missing\n".to_string());
    let (s, msg) = state();
    assert_eq!(s, "failed", "{msg}");
    assert!(
        msg.as_str().is_some_and(|m| m.contains("never started: 16m") && m.contains("Systems Manager answered")),
        "{msg}"
    );
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    assert_eq!(state_of(&c, &id).await, InstanceStateName::Terminated);
}

/// A floating pool of 2 on-demand A10G nodes that may live in the sim cloud's us-east-1
/// or in AWS eu-west-1 (moto): created in the sim while it is cheap, moved to AWS once
/// the sim trace makes it dear, and empty afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn a_floating_pool_moves_from_the_sim_cloud_to_aws() {
    use crate::aws::cli::{ACCESS_KEY, SECRET_KEY, run_env};
    let region = "eu-west-1";
    let c = client(region).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = format!(
        r#"provider "sim" {{
  seed = 7
}}

provider "aws" {{
  region   = "{region}"
  endpoint = "{endpoint}"
  image    = "ami-0123456789abcdef0"
}}

gpu_pool "train" {{
  gpu           = "A10G"
  gpus_per_node = 1
  nodes {{
    min     = 0
    desired = 2
    max     = 4
  }}
  mix {{
    on_demand_base = 2
    spot_percent   = 0
  }}
  placement {{
    candidates = [
      {{ provider = "sim", region = "us-east-1" }},
      {{ provider = "aws", region = "{region}" }},
    ]
    min_saving = 10
    min_stay   = "1h"
  }}
}}
"#,
        endpoint = endpoint()
    );
    write_spec(dir, &spec);
    // 0.50 USD per GPU-hour in the sim at first (AWS's catalog: 1.006), 5.00 from 02:00.
    let trace = "\
time,provider,region,gpu,capacity,price_usd_hour,available_nodes
2026-03-10T00:00:00Z,sim,us-east-1,A10G,on-demand,0.50,
2026-03-10T00:00:00Z,sim,us-east-1,A10G,spot,0.30,
2026-03-10T02:00:00Z,sim,us-east-1,A10G,on-demand,5.00,
2026-03-10T02:00:00Z,sim,us-east-1,A10G,spot,3.00,
";
    std::fs::write(dir.join("trace.csv"), trace).unwrap();
    let gp = |args: &[&str]| {
        let r = run_env(dir, args, Some((ACCESS_KEY, SECRET_KEY)), &[("GPUPLAN_SIM_START", crate::sim_run::SIM_START)]);
        assert_eq!(r.code, 0, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
        r
    };
    gp(&["sim", "trace", "trace.csv"]);
    let plan: serde_json::Value = serde_json::from_str(&gp(&["plan", "--json"]).stdout).unwrap();
    assert_eq!(plan["placements"][0]["chosen"], "sim us-east-1", "{:#}", plan["placements"]);
    gp(&["apply", "--auto-approve"]);
    let lineage = lineage(dir);
    assert!(tagged(&c, &lineage).await.is_empty(), "nothing on AWS yet");

    gp(&["sim", "advance", "2h"]);
    let plan: serde_json::Value = serde_json::from_str(&gp(&["plan", "--json"]).stdout).unwrap();
    let p = &plan["placements"][0];
    assert_eq!((p["action"].as_str(), p["chosen"].as_str()), (Some("move"), Some("aws eu-west-1")), "{p:#}");
    assert_eq!(p["current"], "sim us-east-1", "{p:#}");
    let r = gp(&["apply", "--auto-approve"]);
    let log = format!("{}{}", r.stdout, r.stderr);
    let created = log.find("created").unwrap_or_else(|| panic!("{log}"));
    let terminated = log.find("terminated 2 nodes through sim").unwrap_or_else(|| panic!("{log}"));
    assert!(created < terminated, "new nodes before old ones go:\n{log}");
    let on_aws = tagged(&c, &lineage).await;
    assert_eq!(on_aws.len(), 2, "{on_aws:?}\n{log}");
    let text = std::fs::read_to_string(dir.join("state/default.json")).unwrap();
    let state: serde_json::Value = crate::state_plain::plain(serde_json::from_str(&text).unwrap());
    let pool = &state["resources"]["gpu_pool.train"];
    assert_eq!((pool["provider"].as_str(), pool["provider_kind"].as_str()), (Some("aws"), Some("aws")), "{pool:#}");
    let nodes = pool["nodes"].as_array().unwrap();
    assert!(nodes.len() == 2 && nodes.iter().all(|n| n["provider"] == "aws" && n["region"] == region), "{pool:#}");

    let r = run_env(
        dir,
        &["plan", "--detailed-exitcode"],
        Some((ACCESS_KEY, SECRET_KEY)),
        &[("GPUPLAN_SIM_START", crate::sim_run::SIM_START)],
    );
    assert_eq!(r.code, 0, "the plan after the move is empty:\n{}\n{}", r.stdout, r.stderr);
    gp(&["destroy", "--auto-approve"]);
    assert!(tagged(&c, &lineage).await.is_empty(), "destroy leaves nothing on AWS");
}

/// A front for moto for GPU health reads: every SSM agent asked about is `Online` (moto
/// answers `DescribeInstanceInformation` 500), and `GetCommandInvocation` of an instance
/// in `outputs` answers what its tools printed (moto answers every command Success with
/// empty output). `SendCommand` and everything else go to moto.
fn health_front(outputs: BTreeMap<String, String>) -> crate::aws::fake_ec2::FakeEc2 {
    use crate::aws::fake_ec2::{FakeEc2, Reply, forward};
    let host = endpoint().trim_start_matches("http://").trim_end_matches('/').to_string();
    FakeEc2::start(move |req, _| {
        let target = req.headers.get("x-amz-target").map(String::as_str).unwrap_or("");
        let asked: serde_json::Value = serde_json::from_str(&req.body).unwrap_or_default();
        let scripted = asked["InstanceId"].as_str().and_then(|id| outputs.get(id));
        match (target, scripted) {
            ("AmazonSSM.DescribeInstanceInformation", _) => {
                let ids = asked["Filters"][0]["Values"].as_array().cloned().unwrap_or_default();
                let list: Vec<serde_json::Value> =
                    ids.iter().map(|id| serde_json::json!({"InstanceId": id, "PingStatus": "Online"})).collect();
                Reply { status: 200, body: serde_json::json!({"InstanceInformationList": list}).to_string() }
            }
            ("AmazonSSM.GetCommandInvocation", Some(out)) => {
                let doc = serde_json::json!({"CommandId": asked["CommandId"], "InstanceId": asked["InstanceId"],
                    "Status": "Success", "ResponseCode": 0, "StandardOutputContent": out});
                Reply { status: 200, body: doc.to_string() }
            }
            _ => forward(&host, req),
        }
    })
}

/// GPU health through Systems Manager: one `SendCommand` of the capture script to every
/// node (moto), and each node's `GetCommandInvocation` output parsed: a pre-Ampere GPU
/// with double-bit errors and a page retirement pending, a healthy A100. A node whose
/// output is no capture (moto's empty answer) is left out, never reported healthy.
#[tokio::test(flavor = "multi_thread")]
async fn gpu_health_is_read_through_ssm() {
    use crate::health_captures::agent_output;
    use gpuplan::model::health::Signal;
    use gpuplan::providers::Provider;
    let region = "ca-central-1";
    let c = client(region).await;
    let ids = [foreign_instance(&c).await, foreign_instance(&c).await, foreign_instance(&c).await];
    let outputs: BTreeMap<String, String> = [
        (ids[0].clone(), agent_output("nvidia-smi/tesla-p100-dbe.xml", "", "kernel/dmesg-xid-13-iso.log")),
        (ids[1].clone(), agent_output("nvidia-smi/a100-sxm4-v12.xml", "dcgm/health-healthy.json", "")),
    ]
    .into();
    let front = health_front(outputs);
    let p = AwsProvider::new(AwsSettings { endpoint: Some(front.url.clone()), ..settings() });
    let port = p.health().expect("AWS reads GPU health");
    let read = port.read_health(region, &ids).await.expect("read");
    assert_eq!(read.iter().map(|h| h.node_id.as_str()).collect::<Vec<_>>(), vec![ids[0].as_str(), ids[1].as_str()]);
    let bad: Vec<_> = read[0].findings.iter().map(|f| (f.signal, f.gpu)).collect();
    assert_eq!(bad, vec![(Signal::EccUncorrectable, Some(0)), (Signal::RowRemapPending, Some(0))]);
    assert_eq!((read[1].findings.len(), read[1].gpus_seen), (0, Some(1)));
    assert_eq!(ssm_calls(&front, "SendCommand"), 1, "one command for every node");
    let sent = front.requests().into_iter().find(|r| r.body.contains("AWS-RunShellScript")).expect("the command");
    let sent: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(sent["InstanceIds"].as_array().map(Vec::len), Some(3), "{sent:#}");
    assert!(sent["Parameters"]["commands"][0].as_str().unwrap_or("").contains("nvidia-smi -q -x"), "{sent:#}");
}
