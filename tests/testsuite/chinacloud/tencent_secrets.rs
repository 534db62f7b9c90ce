//! `tencent-ssm:` secrets (issue 50) against the fake's Secrets Manager: a job on a warm
//! CVM node gets the newest version's value through TAT `RunCommand` (the run-command
//! agent's parameter, read by gpuplan just before the send, signed like every Tencent
//! call); a node booted for the job is refused before anything is read or made; a missing
//! secret fails the send naming the reference. The value is nowhere else: not in any
//! instance's user data, the status returned or an error.

use gpuplan::providers::{CreateNodes, JobPort, LaunchJob, TAG_MANAGED};

use crate::chinacloud::secret_launch;
use crate::chinacloud::tencent::provider;
use crate::chinacloud::tencent_fake::{Fake, SECRET_KEY};

const REGION: &str = "ap-guangzhou";
const OLD: &str = "hf-OLD-version-value-1Ab";
const NEW: &str = "hf-NEW-version-value-9Zy";

fn launch(node: &str, secret: &str, shape: Option<CreateNodes>) -> LaunchJob {
    secret_launch::launch(REGION, "HF_TOKEN", node, secret, shape)
}

#[tokio::test]
async fn a_warm_node_gets_a_tencent_ssm_secret_through_tat_and_a_job_node_is_refused() {
    let fake = Fake::start();
    fake.lock().secrets.insert(
        "hf-token".into(),
        vec![("v1".into(), 1_700_000_000, OLD.into()), ("v2".into(), 1_700_000_100, NEW.into())],
    );
    let p = provider(&fake, SECRET_KEY);
    let node = fake.add(REGION, "ap-guangzhou-3", &[(TAG_MANAGED, "true")]);

    let st = p.launch_job(&launch(&node, "tencent-ssm:hf-token", None)).await.expect("a warm node takes it");
    assert!(!format!("{st:?}").contains(NEW), "the status carries the value: {st:?}");
    let scripts: Vec<String> = fake.lock().invocations.values().map(|(_, s)| s.clone()).collect();
    assert_eq!(scripts.len(), 1, "one RunCommand");
    assert!(scripts[0].contains(NEW) && scripts[0].contains("-e HF_TOKEN"), "{}", scripts[0]);
    assert!(!scripts[0].contains(OLD), "the newest version is read: {}", scripts[0]);
    assert_eq!(fake.calls("GetSecretValue").len(), 1);

    // A node booted for the job would hold the value in its user data: refused first.
    let shape = secret_launch::job_node(REGION, "ap-guangzhou-3", "GN7.2XLARGE32", "img-test");
    let before = fake.instances().len();
    let e = p.launch_job(&launch("", "tencent-ssm:hf-token", Some(shape))).await.expect_err("a job node");
    assert_eq!(e.code, "SecretNotDeliverable", "{e:?}");
    assert!(e.message.contains("tencent-ssm:hf-token") && e.message.contains("run-command"), "{}", e.message);
    assert_eq!(fake.instances().len(), before, "no instance made");
    assert_eq!(fake.calls("GetSecretValue").len(), 1, "nothing read for a refused launch");

    // A secret that does not exist: the send fails naming it, and nothing is sent.
    let e = p.launch_job(&launch(&node, "tencent-ssm:absent", None)).await.expect_err("a missing secret");
    assert!(e.message.contains("tencent-ssm:absent"), "{e:?}");
    assert_eq!(fake.lock().invocations.len(), 1, "no RunCommand for it");

    for i in fake.instances() {
        assert!(!i.user_data.unwrap_or_default().contains(NEW), "a value in user data");
    }
}

/// The look-everywhere test on Tencent Cloud, through the CLI: a job reading a
/// `tencent-ssm:` secret runs on a warm node of an applied pool; the value is in the TAT
/// `RunCommand` that carried it and in no file gpuplan wrote (state, journal, backups,
/// saved plan), no output of plan, show, apply or jobs, and no instance's user data; the
/// reference is where a reader looks.
#[test]
fn a_tencent_ssm_value_appears_only_in_the_run_command_that_carried_it() {
    let fake = Fake::start();
    fake.lock().secrets.insert("hf-token".into(), vec![("v1".into(), 1_700_000_000, NEW.into())]);
    let f = crate::chinacloud::tencent::fleet(&fake, &["ap-guangzhou-3"], 2, "");
    f.run(&["apply", "--auto-approve"]).expect(0);
    let spec = std::fs::read_to_string(f.path().join("main.hcl")).unwrap()
        + "job_template \"t\" {\n  image = \"nginx\"\n  gpus  = 1\n  env = {\n    HF_TOKEN = secret(\"tencent-ssm:hf-token\")\n  }\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    std::fs::write(f.path().join("main.hcl"), spec).unwrap();
    let mut seen = Vec::new();
    let plan = f.run(&["plan", "-out", "saved.plan"]).expect(0);
    assert!(plan.stdout.contains("(secret: tencent-ssm:hf-token)"), "{}", plan.stdout);
    seen.push(plan.stdout + &plan.stderr);
    for args in [&["show", "saved.plan", "--json"][..], &["plan", "--format", "markdown"]] {
        let r = f.run(args).expect(0);
        seen.push(r.stdout + &r.stderr);
    }
    let applied = f.run(&["apply", "--auto-approve"]).expect(0);
    seen.push(applied.stdout + &applied.stderr);
    let status = f.run(&["jobs", "status", "once", "--json"]).expect(0);
    seen.push(status.stdout + &status.stderr);

    let scripts: Vec<String> = fake.lock().invocations.values().map(|(_, s)| s.clone()).collect();
    assert!(scripts.iter().any(|s| s.contains(NEW)), "the value reached the node through TAT: {scripts:?}");
    seen.push(f.all_files_text());
    for i in fake.instances() {
        seen.push(i.user_data.unwrap_or_default());
    }
    for text in &seen {
        assert!(!text.contains(NEW), "the value outside the send:\n{text}");
    }
    assert!(f.all_files_text().contains("tencent-ssm:hf-token"), "the state and saved plan keep the reference");
}
