use super::*;
use crate::diag::Sources;
use k8s_openapi::api::batch::v1::Job as K8sJob;

const SPEC: &str = r#"
provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = 2
    max     = 4
  }
}

job_template "finetune" {
  image          = "ghcr.io/example/finetune:1.4"
  command        = ["python", "train.py"]
  env            = { WANDB_PROJECT = "ml-finetune", YES = "yes", ODD = "a: b # c" }
  gpus           = 8
  priority       = "high"
  preemptible    = true
  max_runtime    = "12h"
  retries        = 2
  checkpoint_uri = "s3://example-ckpt/ml/finetune"
}

job_template "serve" {
  image = "nginx"
  gpus  = 1
}

job "llama_sweep" {
  count    = 2
  template = job_template.finetune
  pool     = gpu_pool.train
  args     = ["--lr", "0.001"]
  replicas = 2
}

job "eval" {
  template = job_template.serve
  pool     = gpu_pool.train
}
"#;

fn spec() -> Spec {
    let mut sources = Sources::default();
    sources.add("main.hcl", SPEC);
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    loaded.spec
}

fn render(spec: &Spec, name: &str) -> String {
    let docs: Vec<K8sJob> = resolve(spec, name).into_iter().filter_map(|a| manifest(spec, a, 1, None)).collect();
    to_yaml(&docs).expect("serializes")
}

/// Read a YAML stream back (serde-saphyr's YAML 1.2 reader) as JSON values.
fn parse_back(text: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple(text).expect("the rendered YAML parses")
}

fn to_json(j: &K8sJob) -> serde_json::Value {
    serde_json::to_value(j).expect("a Job serializes")
}

#[test]
fn preemptible_job_manifest_snapshot() {
    let spec = spec();
    insta::assert_snapshot!("k8s_llama_sweep_0", render(&spec, "llama_sweep[0]"));
}

#[test]
fn on_demand_job_manifest_snapshot() {
    let spec = spec();
    insta::assert_snapshot!("k8s_eval", render(&spec, "job.eval"));
}

#[test]
fn manifests_parse_back_to_the_same_values() {
    let spec = spec();
    let addrs = resolve(&spec, "llama_sweep");
    assert_eq!(addrs.len(), 2, "a name without a key selects every instance");
    let docs: Vec<K8sJob> = addrs.iter().map(|a| manifest(&spec, a, 3, Some("lin-1")).expect("renders")).collect();
    let text = to_yaml(&docs).expect("serializes");
    let back = parse_back(&text);
    assert_eq!(back, docs.iter().map(to_json).collect::<Vec<_>>());
    let first = &back[0];
    assert_eq!(first["spec"]["backoffLimit"], 2);
    assert_eq!(first["spec"]["activeDeadlineSeconds"], 12 * 3600);
    assert_eq!(first["spec"]["completions"], 2);
    let pod = &first["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "8");
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(first["spec"]["podReplacementPolicy"], "Failed");
    let rule = &first["spec"]["podFailurePolicy"]["rules"][0];
    assert_eq!(rule["action"], "Ignore", "a reclaimed pod does not spend a retry");
    assert_eq!(rule["onPodConditions"][0]["type"], "DisruptionTarget");
    assert_eq!(first["metadata"]["labels"]["gpuplan.dev/lineage"], "lin-1");
    assert_eq!(first["metadata"]["labels"]["gpuplan.dev/attempt"], "3");
    assert_eq!(pod["priorityClassName"], "gpuplan-high");
    assert_eq!(pod["nodeSelector"]["gpuplan.dev/pool"], "train");
    let env = pod["containers"][0]["env"].as_array().expect("env list");
    let value = |k: &str| env.iter().find(|e| e["name"] == k).map(|e| e["value"].clone());
    assert_eq!(value("GPUPLAN_CHECKPOINT_URI"), Some("s3://example-ckpt/ml/finetune".into()));
    assert_eq!(value("GPUPLAN_ATTEMPT"), Some("3".into()), "a quoted number stays a string");
    assert_eq!(value("YES"), Some("yes".into()), "`yes` stays a string");
    assert_eq!(value("ODD"), Some("a: b # c".into()));
    assert_eq!(first["metadata"]["name"], "llama-sweep-0");
}

#[test]
fn only_preemptible_jobs_tolerate_spot_and_others_select_on_demand() {
    let spec = spec();
    let json = |name: &str| to_json(&manifest(&spec, resolve(&spec, name)[0], 1, None).expect("renders"));
    let sweep = json("llama_sweep[1]");
    let eval = json("eval");
    let tolerates_spot = |j: &serde_json::Value| {
        j["spec"]["template"]["spec"]["tolerations"].as_array().unwrap().iter().any(|t| t["value"] == "spot")
    };
    assert!(tolerates_spot(&sweep));
    assert!(!tolerates_spot(&eval));
    assert_eq!(eval["spec"]["template"]["spec"]["nodeSelector"]["gpuplan.dev/capacity"], "on-demand");
    assert!(sweep["spec"]["template"]["spec"]["nodeSelector"].get("gpuplan.dev/capacity").is_none());
    assert!(eval["spec"].get("activeDeadlineSeconds").is_none());
    assert_eq!(eval["spec"]["template"]["spec"]["priorityClassName"], "gpuplan-medium");
}

#[test]
fn object_names_are_dns_labels() {
    assert_eq!(object_name(&"job.llama_sweep[2]".parse().unwrap()), "llama-sweep-2");
    assert_eq!(object_name(&"job.x[\"EU West\"]".parse().unwrap()), "x-eu-west");
    assert!(resolve(&spec(), "nope").is_empty());
}

/// A `k8s:` secret is a `secretKeyRef` in the container's env: the manifest names the
/// Secret and its key, and a job's variable replaces its template's.
#[test]
fn k8s_secrets_are_secret_key_refs_and_never_values() {
    let mut sources = Sources::default();
    sources.add(
        "main.hcl",
        format!(
            "{SPEC}\njob \"secretive\" {{\n  template = job_template.serve\n  pool = gpu_pool.train\n  env = {{\n    HF_TOKEN = secret(\"k8s:hf-token/token\")\n    WANDB_PROJECT = \"p\"\n  }}\n}}\n"
        ),
    );
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    let doc = to_json(&manifest(&loaded.spec, resolve(&loaded.spec, "secretive")[0], 1, None).expect("renders"));
    let env = doc["spec"]["template"]["spec"]["containers"][0]["env"].as_array().expect("env list").clone();
    let hf = env.iter().find(|e| e["name"] == "HF_TOKEN").expect("HF_TOKEN");
    assert_eq!(hf["valueFrom"]["secretKeyRef"], serde_json::json!({"name": "hf-token", "key": "token"}));
    assert!(hf.get("value").is_none(), "{hf}");
    assert!(env.iter().any(|e| e["name"] == "WANDB_PROJECT" && e["value"] == "p"));
}
