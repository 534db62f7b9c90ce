//! Loading a folder of files: parsing them on two threads gives exactly what parsing them
//! one after the other gives.

use super::*;

/// Files of every kind the loader meets: good HCL, HCL with a syntax error, HCL with a
/// problem found later, spec YAML, broken YAML and another tool's YAML file.
fn folder() -> Sources {
    let mut sources = Sources::default();
    for i in 0..12 {
        let (name, text) = match i % 6 {
            0 => (format!("p{i}.hcl"), format!("gpu_pool \"p{i}\" {{\n  provider = \"sim\"\n  gpu = \"L4\"\n}}\n")),
            1 => (format!("p{i}.hcl"), format!("gpu_pool \"p{i}\" {{\n  provider = = \"sim\"\n}}\n")),
            2 => (format!("p{i}.hcl"), format!("gpu_pol \"p{i}\" {{}}\nlocals {{\n  x = \"${{\"\n}}\n")),
            3 => (format!("p{i}.yaml"), format!("gpu_pools:\n  q{i}:\n    provider: sim\n    gpu: L4\n")),
            4 => (format!("p{i}.yaml"), "gpu_pools:\n  - [unclosed\n".to_string()),
            _ => (format!("ci{i}.yml"), "apiVersion: v1\nkind: Config\nclusters: []\n".to_string()),
        };
        sources.add(name, text);
    }
    sources
}

#[test]
fn files_parsed_on_two_threads_come_back_in_file_order_with_the_same_diagnostics() {
    let sources = folder();
    let todo: Vec<_> = sources.files().collect();
    assert!(two_threads(&todo), "a small folder of several files is parsed on two threads");
    let one = parse_files(&todo, false);
    assert!(one.iter().any(|(_, _, d)| d.has_errors()), "the folder has broken files");
    assert!(one.iter().any(|(_, p, _)| matches!(p, Parsed::Foreign(_))), "the folder has another tool's file");
    assert!(one.iter().any(|(_, p, _)| matches!(p, Parsed::Unparsable)), "the folder has unparsable files");
    let two = parse_files(&todo, true);
    assert_eq!(two.len(), one.len());
    for ((id1, p1, d1), (id2, p2, d2)) in one.iter().zip(&two) {
        assert_eq!(id1, id2);
        assert_eq!(p1, p2, "file {id1}");
        assert_eq!(d1.items, d2.items, "file {id1}");
    }
    // One file, or a large spec, stays on the calling thread.
    assert!(!two_threads(&todo[..1]));
    let mut big = Sources::default();
    big.add("a.hcl", " ".repeat(PARSE_TWO_UP_TO));
    big.add("b.hcl", " ");
    assert!(!two_threads(&big.files().collect::<Vec<_>>()));
}

/// A spec whose providers read a variable, a local and the environment, beside pools,
/// a quota and a job.
fn fleet_dir(extra: &str) -> tempfile::TempDir {
    const NODES: &str = "gpus_per_node = 1\n  nodes {\n    min = 0\n    desired = 1\n    max = 4\n  }\n";
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("main.hcl"),
        "variable \"region\" {\n  type    = string\n  default = \"us-east-1\"\n}\n\
         locals {\n  seed = 40 + 2\n}\n\
         provider \"sim\" {\n  region = var.region\n  seed   = local.seed\n}\n\
         provider \"aws\" {\n  region = env(\"SPEC_TEST_AWS_REGION\", \"us-west-2\")\n}\n\
         gpuplan {\n  backend \"local\" {\n    path = \"elsewhere/state.json\"\n  }\n}\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("pools.hcl"),
        format!(
            "gpu_pool \"a\" {{\n  provider = \"sim\"\n  gpu = \"L4\"\n  {NODES}}}\n\
             gpu_pool \"b\" {{\n  provider = \"aws\"\n  gpu = \"L4\"\n  {NODES}  depends_on = [gpu_pool.a]\n}}\n\
             quota \"team\" {{\n  max_gpus = 16\n  pools = [gpu_pool.a]\n}}\n{extra}"
        ),
    )
    .expect("write");
    dir
}

fn options(env: &[(&str, &str)], vars: &[(&str, &str)]) -> LoadOptions {
    LoadOptions {
        env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..LoadOptions::with_flags(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }
}

#[test]
fn a_load_names_the_environment_variables_it_looked_up() {
    let dir = fleet_dir("");
    let loaded = load_dir(dir.path(), &options(&[("UNRELATED", "x")], &[])).expect("load");
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    assert_eq!(loaded.env_read, ["GPUPLAN_VAR_region", "SPEC_TEST_AWS_REGION"]);
}

#[test]
fn the_providers_part_decoded_alone_is_the_whole_spec_s() {
    let dir = fleet_dir("");
    let opts = options(&[("SPEC_TEST_AWS_REGION", "us-east-2")], &[("region", "us-west-2")]);
    let read = read_dir(dir.path()).expect("read");
    // Only with the variables' values given whole: not while var files may add some.
    assert!(load_providers_part(&read, &opts).is_none(), "decoded alone, with `*.auto.vars.hcl` to read");
    let opts = LoadOptions { auto_var_files: false, ..opts };
    let (part, skipped) = load_providers_part(&read, &opts).expect("the providers' part stands alone");
    assert!(skipped.is_empty());
    let whole = load_dir(dir.path(), &opts).expect("load");
    assert!(!whole.diags.has_errors(), "{:?}", whole.diags.items);
    assert_eq!(whole.spec.gpu_pools.len(), 2);
    // What `engine::providers::providers_part` keeps (its own test checks it builds the
    // same providers): the providers, the backend and pools on Kubernetes (none here).
    assert_eq!(part.providers, whole.spec.providers);
    assert_eq!(part.backend, whole.spec.backend);
    assert!(part.providers["aws"].region.as_ref().is_some_and(|r| r.value == "us-east-2"), "{:?}", part.providers);
    assert!(part.backend.is_some());
    assert!(part.gpu_pools.is_empty() && part.quotas.is_empty(), "the rest is not decoded");
}

#[test]
fn a_providers_part_that_cannot_stand_alone_is_not_decoded_alone() {
    let opts = LoadOptions { auto_var_files: false, ..options(&[], &[]) };
    // A pool on a Kubernetes cluster builds a provider of its own.
    let k8s = fleet_dir(
        "gpu_pool \"k\" {\n  provider = \"sim\"\n  gpu = \"L4\"\n  gpus_per_node = 1\n  nodes {\n    min = 0\n    desired = 1\n    max = 4\n  }\n  kubernetes {\n    namespace = \"ml\"\n  }\n}\n",
    );
    assert!(load_providers_part(&read_dir(k8s.path()).expect("read"), &opts).is_none());
    // A local that the providers may read refers to a pool, left out here.
    let refers = fleet_dir("locals {\n  zone = gpu_pool.a.gpu\n}\n");
    let whole = load_dir(refers.path(), &opts).expect("load");
    assert!(!whole.diags.has_errors(), "the whole spec is valid: {:?}", whole.diags.items);
    assert!(load_providers_part(&read_dir(refers.path()).expect("read"), &opts).is_none());
    // A file that does not parse.
    let broken = fleet_dir("gpu_pool \"c\" {\n");
    assert!(load_providers_part(&read_dir(broken.path()).expect("read"), &opts).is_none());
}

/// A spec whose raw tree is left to the exit loads as one whose tree is freed: the same
/// spec and the same diagnostics.
#[test]
fn a_raw_tree_left_to_the_exit_loads_the_same_spec() {
    let dir = fleet_dir("gpu_pool \"b\" {\n  provider = \"nowhere\"\n  gpu = \"A100-80GB\"\n}\n");
    let opts = options(&[], &[]);
    let freed = load_dir(dir.path(), &opts).expect("load");
    let left = load_dir(dir.path(), &LoadOptions { raw_tree_to_exit: true, ..opts }).expect("load");
    assert!(freed.diags.has_errors(), "the second pool names no provider block");
    assert_eq!(format!("{:?}", left.spec), format!("{:?}", freed.spec));
    assert_eq!(format!("{:?}", left.diags.items), format!("{:?}", freed.diags.items));
}
