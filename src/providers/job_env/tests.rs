//! Secret references through the spec: HCL's `secret()` and YAML's `{secret: …}` decode
//! to the same reference, a job's variable replaces its template's, and the launch's
//! environment keeps references apart from values.

use crate::diag::Sources;
use crate::model::secret::{EnvValue, SecretRef};
use crate::providers::job_env;
use crate::spec::{LoadOptions, load_sources};

const POOL: &str = "provider \"sim\" {\n  region = \"us-east-1\"\n}\n\
    gpu_pool \"train\" {\n  provider = \"sim\"\n  gpu = \"L4\"\n  gpus_per_node = 1\n  nodes {\n    desired = 1\n    max = 2\n  }\n}\n";

fn secret(text: &str) -> EnvValue {
    EnvValue::Secret { secret: SecretRef::parse(text).expect("a reference") }
}

#[test]
fn hcl_and_yaml_references_decode_alike_and_a_job_replaces_its_templates_variable() {
    let mut sources = Sources::default();
    sources.add("main.hcl", format!(
        "{POOL}job_template \"t\" {{\n  image = \"x\"\n  env = {{\n    HF_TOKEN = secret(\"aws-sm:ml/hf-token#token\")\n    MODE = \"train\"\n    WANDB = secret(\"ssm:/ml/wandb\")\n  }}\n}}\n"
    ));
    sources.add(
        "jobs.yaml",
        "jobs:\n  a:\n    template: job_template.t\n    pool: gpu_pool.train\n    env:\n      MODE: {secret: \"env:CI_MODE\"}\n      WANDB: plain\n",
    );
    let loaded = load_sources(sources, &LoadOptions::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    let spec = loaded.spec;
    let t = spec.job_templates.values().next().expect("a template");
    assert_eq!(t.env["HF_TOKEN"].value, secret("aws-sm:ml/hf-token#token"));
    assert_eq!(t.env["MODE"].value, EnvValue::Text("train".into()));
    let (addr, job) = spec.jobs.iter().next().expect("a job");
    assert_eq!(job.env["MODE"].value, secret("env:CI_MODE"));

    let env = job_env::env(addr, job, t, 0, 1);
    let refs: Vec<(String, String)> = env.secrets.iter().map(|(k, r)| (k.clone(), r.to_string())).collect();
    assert_eq!(refs, [("HF_TOKEN".into(), "aws-sm:ml/hf-token#token".into()), ("MODE".into(), "env:CI_MODE".into())]);
    assert_eq!(env.plain.get("WANDB").map(String::as_str), Some("plain"), "the job's value replaces the secret");
    assert!(!env.plain.contains_key("MODE") && !env.plain.contains_key("HF_TOKEN"), "{:?}", env.plain);
}

#[test]
fn replicas_of_a_multi_node_job_get_the_rendezvous_and_a_single_one_none() {
    let mut sources = Sources::default();
    sources.add(
        "main.hcl",
        format!(
            "{POOL}job_template \"t\" {{\n  image = \"x\"\n}}\njob \"one\" {{\n  template = job_template.t\n  pool = gpu_pool.train\n}}\n\
             job \"four\" {{\n  template = job_template.t\n  pool = gpu_pool.train\n  replicas = 2\n  env = {{\n    GPUPLAN_MASTER_ADDR = \"mine\"\n  }}\n}}\n"
        ),
    );
    let loaded = load_sources(sources, &LoadOptions::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    let spec = loaded.spec;
    let t = spec.job_templates.values().next().expect("a template");
    let (four, job) = spec.jobs.iter().find(|(a, _)| a.name == "four").expect("four");
    let mut env = job_env::env(four, job, t, 1, 1).plain;
    assert_eq!(env["GPUPLAN_NNODES"], "2");
    assert_eq!(env["GPUPLAN_NODE_RANK"], "1");
    assert_eq!(env["GPUPLAN_MASTER_PORT"], "29500");
    assert!(!env.contains_key("GPUPLAN_MASTER_ADDR"), "gpuplan's own, known at launch: {env:?}");
    assert_eq!(job_env::node_rank(&env), Some(1));
    job_env::with_master(&mut env, "10.0.1.7");
    assert_eq!(env["GPUPLAN_MASTER_ADDR"], "10.0.1.7");

    let (one, job) = spec.jobs.iter().find(|(a, _)| a.name == "one").expect("one");
    let mut env = job_env::env(one, job, t, 0, 1).plain;
    assert_eq!(job_env::node_rank(&env), None);
    job_env::with_master(&mut env, "10.0.1.7");
    assert!(env.keys().all(|k| !k.contains("MASTER") && !k.contains("NNODES")), "{env:?}");
}
