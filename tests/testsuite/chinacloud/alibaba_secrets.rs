//! `alicloud-kms:` secrets (issue 50) against the fake's KMS: a job on a warm ECS node
//! gets the secret's value through Cloud Assistant `RunCommand` (the run-command agent's
//! parameter, read by gpuplan just before the send, ACS3-signed like every Alibaba call);
//! a node booted for the job is refused before anything is read or made; a missing secret
//! fails the send naming the reference. The value is nowhere else: not in any instance's
//! user data, the status returned or an error.

use gpuplan::providers::{CreateNodes, JobPort, LaunchJob, TAG_MANAGED};

use crate::chinacloud::alibaba::provider;
use crate::chinacloud::alibaba_fake::{ACCESS_KEY_SECRET, Fake};
use crate::chinacloud::secret_launch;

const REGION: &str = "cn-hangzhou";
const ZONE: &str = "cn-hangzhou-h";
const VALUE: &str = "wandb-KMS-secret-value-5Qw";

fn launch(node: &str, secret: &str, shape: Option<CreateNodes>) -> LaunchJob {
    secret_launch::launch(REGION, "WANDB", node, secret, shape)
}

#[tokio::test]
async fn a_warm_node_gets_an_alicloud_kms_secret_through_cloud_assistant_and_a_job_node_is_refused() {
    let fake = Fake::start();
    fake.lock().secrets.insert("ml/wandb".into(), VALUE.into());
    let p = provider(&fake, ACCESS_KEY_SECRET);
    let node = fake.add(REGION, ZONE, &[(TAG_MANAGED, "true")]);

    let st = p.launch_job(&launch(&node, "alicloud-kms:ml/wandb", None)).await.expect("a warm node takes it");
    assert!(!format!("{st:?}").contains(VALUE), "the status carries the value: {st:?}");
    let scripts: Vec<String> = fake.lock().invocations.values().map(|(_, s, _)| s.clone()).collect();
    assert_eq!(scripts.len(), 1, "one RunCommand");
    assert!(scripts[0].contains(VALUE) && scripts[0].contains("-e WANDB"), "{}", scripts[0]);
    assert_eq!(fake.calls("GetSecretValue").len(), 1);

    // A node booted for the job would hold the value in its user data: refused first.
    let shape = secret_launch::job_node(REGION, ZONE, "ecs.gn7i-c8g1.2xlarge", "m-test");
    let before = fake.instances().len();
    let e = p.launch_job(&launch("", "alicloud-kms:ml/wandb", Some(shape))).await.expect_err("a job node");
    assert_eq!(e.code, "SecretNotDeliverable", "{e:?}");
    assert_eq!(fake.instances().len(), before, "no instance made");
    assert_eq!(fake.calls("GetSecretValue").len(), 1, "nothing read for a refused launch");

    // A secret that does not exist: the send fails naming it, and nothing is sent.
    let e = p.launch_job(&launch(&node, "alicloud-kms:ml/absent", None)).await.expect_err("a missing secret");
    assert!(e.message.contains("alicloud-kms:ml/absent"), "{e:?}");
    assert_eq!(fake.lock().invocations.len(), 1, "no RunCommand for it");

    for i in fake.instances() {
        assert!(!i.user_data.unwrap_or_default().contains(VALUE), "a value in user data");
    }
}

/// The look-everywhere test on Alibaba Cloud, through the CLI: a job reading an
/// `alicloud-kms:` secret runs on a warm node of an applied pool; the value is in the
/// Cloud Assistant `RunCommand` that carried it and in no file gpuplan wrote, no output of
/// plan, show, apply or jobs, and no instance's user data.
#[test]
fn an_alicloud_kms_value_appears_only_in_the_run_command_that_carried_it() {
    let fake = Fake::start();
    fake.lock().secrets.insert("ml/wandb".into(), VALUE.into());
    let f = crate::chinacloud::alibaba::fleet(&fake, &[ZONE], 2, "    spot_percent = 0");
    f.run(&["apply", "--auto-approve"]).expect(0);
    let spec = std::fs::read_to_string(f.path().join("main.hcl")).unwrap()
        + "job_template \"t\" {\n  image = \"nginx\"\n  gpus  = 1\n  env = {\n    WANDB = secret(\"alicloud-kms:ml/wandb\")\n  }\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    std::fs::write(f.path().join("main.hcl"), spec).unwrap();
    let mut seen = Vec::new();
    let plan = f.run(&["plan", "-out", "saved.plan"]).expect(0);
    assert!(plan.stdout.contains("(secret: alicloud-kms:ml/wandb)"), "{}", plan.stdout);
    seen.push(plan.stdout + &plan.stderr);
    for args in [&["show", "saved.plan", "--json"][..], &["plan", "--format", "markdown"]] {
        let r = f.run(args).expect(0);
        seen.push(r.stdout + &r.stderr);
    }
    let applied = f.run(&["apply", "--auto-approve"]).expect(0);
    seen.push(applied.stdout + &applied.stderr);
    let status = f.run(&["jobs", "status", "once", "--json"]).expect(0);
    seen.push(status.stdout + &status.stderr);

    let scripts: Vec<String> = fake.lock().invocations.values().map(|(_, s, _)| s.clone()).collect();
    assert!(scripts.iter().any(|s| s.contains(VALUE)), "the value reached the node: {scripts:?}");
    seen.push(f.all_files_text());
    for i in fake.instances() {
        seen.push(i.user_data.unwrap_or_default());
    }
    for text in &seen {
        assert!(!text.contains(VALUE), "the value outside the send:\n{text}");
    }
    assert!(f.all_files_text().contains("alicloud-kms:ml/wandb"), "the state and saved plan keep the reference");
}
