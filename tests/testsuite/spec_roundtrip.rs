//! What `gpuplan fmt` and the two spellings promise: formatting never changes what a spec
//! means (the formatted files decode to an equal `Spec`; `Spec` equality ignores spans),
//! formatting twice changes nothing, and the quickstart written in HCL and in YAML decodes
//! to the same `Spec`.

use std::path::Path;

use gpuplan::diag::{Diagnostics, Sources};
use gpuplan::spec::{self, LoadOptions, Loaded};

/// `(name, text)` of every spec file of an example directory.
fn example(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(dir);
    spec::spec_files(&root)
        .expect("example dir")
        .into_iter()
        .map(|p| {
            let name = p.file_name().expect("file name").to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("read example"))
        })
        .collect()
}

fn load(files: &[(String, String)]) -> Loaded {
    let mut sources = Sources::default();
    for (name, text) in files {
        sources.add(name.clone(), text.clone());
    }
    let loaded = spec::load_sources(sources, &LoadOptions::default());
    let rendered = gpuplan::diag::render_text(&loaded.sources, &loaded.diags.items, 100, false);
    assert!(!loaded.diags.has_errors(), "spec does not load:\n{rendered}");
    loaded
}

fn format(name: &str, text: &str) -> String {
    let mut diags = Diagnostics::default();
    let out = if name.ends_with(".yaml") || name.ends_with(".yml") {
        spec::yaml::format(0, text, &mut diags)
    } else {
        spec::hcl::format(0, text, &mut diags)
    };
    assert!(diags.items.is_empty(), "formatting {name} reported {:?}", diags.items);
    out.unwrap_or_else(|| panic!("{name} did not format"))
}

/// Format every file; the result must mean the same and be a fixed point. Returns
/// whether formatting changed anything.
fn check_round_trip(files: &[(String, String)]) -> bool {
    let before = load(files);
    let formatted: Vec<(String, String)> = files.iter().map(|(n, t)| (n.clone(), format(n, t))).collect();
    for (name, text) in &formatted {
        assert_eq!(&format(name, text), text, "formatting {name} twice changed it");
    }
    let after = load(&formatted);
    assert_eq!(before.spec, after.spec, "formatting changed what the spec means");
    files != formatted.as_slice()
}

#[test]
fn examples_survive_fmt() {
    for dir in ["quickstart", "quickstart-yaml", "multi-cloud"] {
        let files = example(dir);
        assert!(!files.is_empty(), "examples/{dir} has no spec files");
        assert!(!check_round_trip(&files), "examples/{dir} is not formatted; run `gpuplan fmt -C examples/{dir}`");
    }
}

const MESSY_HCL: &str = r#"
# a comment that stays
provider   "sim"{
region="us-east-1"     # trailing comment
  seed = 7
}
variable "team" {
      default = "ml"
}
locals { labels = { team = var.team, "owner" = "platform" } }
gpu_pool "train" {
provider = "sim"
    gpu = "A100-80GB"
  gpus_per_node=8
  zones=["us-east-1a",
     "us-east-1b",]
  nodes {
  min = 0
      desired = 1 + 1
  max = 4
  }
  mix { spot_percent = 50 }
  labels = merge(local.labels, {
    workload = "training"
  })
}
job_template "t" {
  image = "x:1"
  command = [ "python" , "train.py" ]
  max_runtime = "1h30m"
}
job "j" {
template = job_template.t
pool = "train"
}
"#;

const MESSY_YAML: &str = r#"
# a comment that stays
providers:
    sim: {region: us-east-1,   seed: 7}
variables:
  team:
      default: "ml"
locals:
  labels: {team: "${var.team}", 'owner': platform}
gpu_pools:
  train:
      provider: sim
      gpu: 'A100-80GB'
      gpus_per_node:    8
      zones:
      - us-east-1a
      -   us-east-1b
      nodes:
        min: 0
        desired: ${1 + 1}
        max: 4
      mix: { spot_percent: 50 }   # trailing comment
      labels: '${merge(local.labels, {workload = "training"})}'
job_templates:
  t: {image: "x:1", command: [python,   train.py], max_runtime: 1h30m}
jobs:
  j:
    template: job_template.t
    pool: train
"#;

#[test]
fn messy_valid_specs_survive_fmt() {
    assert!(check_round_trip(&[("messy.hcl".into(), MESSY_HCL.into())]), "the messy HCL was already formatted");
    assert!(check_round_trip(&[("messy.yaml".into(), MESSY_YAML.into())]), "the messy YAML was already formatted");
}

#[test]
fn messy_hcl_and_yaml_mean_the_same() {
    let hcl = load(&[("messy.hcl".into(), MESSY_HCL.into())]);
    let yaml = load(&[("messy.yaml".into(), MESSY_YAML.into())]);
    assert_eq!(hcl.spec, yaml.spec);
    assert_eq!(hcl.spec.gpu_pools.len(), 1);
}

#[test]
fn quickstart_hcl_equals_quickstart_yaml() {
    let hcl = load(&example("quickstart"));
    let yaml = load(&example("quickstart-yaml"));
    assert!(!hcl.spec.gpu_pools.is_empty() && !hcl.spec.jobs.is_empty(), "the quickstart lost its pools or jobs");
    assert_eq!(hcl.spec, yaml.spec);
}

/// The comparison above can fail: a one-word change in the YAML is noticed.
#[test]
fn spec_equality_sees_a_changed_value() {
    let hcl = load(&example("quickstart"));
    let changed: Vec<(String, String)> = example("quickstart-yaml")
        .into_iter()
        .map(|(n, t)| (n, t.replace("spot_percent: 70", "spot_percent: 71")))
        .collect();
    assert_ne!(hcl.spec, load(&changed).spec);
}
