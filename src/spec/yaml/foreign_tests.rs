//! Tests of `parse_in_folder`: which YAML files of the spec folder are other tools'.

use super::{FolderFile, parse_in_folder};
use crate::diag::Diagnostics;

const KUBECONFIG: &str = "\
apiVersion: v1
kind: Config
clusters:
  - name: prod
    cluster: {server: https://10.0.0.1}
contexts:
  - name: prod
    context: {cluster: prod, user: admin}
current-context: prod
users:
  - name: admin
    user: {token: abc}
";

const WORKFLOW: &str = "\
name: plan
on:
  pull_request:
permissions:
  contents: read
jobs:
  plan:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: gpuplan plan --format markdown
";

const MANIFESTS: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
---
apiVersion: v1
kind: Service
metadata: {name: web}
";

fn read(text: &str) -> (FolderFile, Diagnostics) {
    let mut d = Diagnostics::default();
    (parse_in_folder(0, text, &mut d), d)
}

fn skipped(text: &str) -> bool {
    let (file, d) = read(text);
    assert!(d.items.is_empty(), "a skipped file reports nothing: {:#?}", d.items);
    matches!(file, FolderFile::Foreign)
}

#[test]
fn other_tools_files_are_skipped_without_a_diagnostic() {
    assert!(skipped(KUBECONFIG), "a kubeconfig");
    assert!(skipped(WORKFLOW), "a GitHub Actions workflow, though it has `jobs:`");
    assert!(skipped(MANIFESTS), "Kubernetes manifests, several documents");
    // The CI recipes this repository ships, as they would sit at a fleet repository's top.
    assert!(skipped(include_str!("../../../examples/ci/github/gpuplan.yml")), "the GitHub recipe");
    assert!(skipped(include_str!("../../../examples/ci/gitlab/.gitlab-ci.yml")), "the GitLab recipe (`variables:`)");
    assert!(skipped("services:\n  web: {image: nginx}\nvolumes: {}\n"), "a compose file");
    assert!(skipped("- hosts: all\n  tasks: []\n"), "a playbook: a list at the top");
    assert!(skipped("just words\n"), "a lone value");
}

#[test]
fn a_file_with_gpuplan_keys_or_near_misses_is_read_and_its_unknown_keys_are_errors() {
    let (file, d) = read("gpu_pool:\n  train: {gpu: L4}\n");
    assert!(matches!(file, FolderFile::Spec(Some(_))), "{file:?}");
    let help = d.items.iter().find(|i| i.code == "gpuplan::spec::unknown_block").and_then(|i| i.help.clone());
    assert!(help.is_some_and(|h| h.contains("did you mean `gpu_pools`?")), "{:#?}", d.items);

    // As many gpuplan keys as foreign ones: read, so a real spec is never dropped.
    let (file, d) = read("gpu_pools:\n  train: {gpu: L4}\napiVersion: v1\n");
    assert!(matches!(file, FolderFile::Spec(Some(_))), "{file:?}");
    assert!(d.items.iter().any(|i| i.message.contains("apiVersion")), "{:#?}", d.items);

    // A spec mistakenly written as a list is read, and its error reported.
    let (file, d) = read("- providers\n- gpu_pools\n");
    assert!(matches!(file, FolderFile::Spec(None)), "{file:?}");
    assert!(d.items.iter().any(|i| i.code == "gpuplan::yaml::not_a_mapping"), "{:#?}", d.items);

    // An empty file and a spec are specs.
    assert!(matches!(read("").0, FolderFile::Spec(Some(_))));
    assert!(matches!(read("providers:\n  sim: {}\n").0, FolderFile::Spec(Some(_))));
}

#[test]
fn a_spec_that_does_not_parse_is_still_reported() {
    let (file, d) = read("gpu_pools:\n  train: [\n");
    assert!(matches!(file, FolderFile::Spec(None)), "{file:?}");
    assert!(d.has_errors());
    // Several documents of gpuplan's: the second-document error stands.
    let (file, d) = read("providers:\n  sim: {}\n---\ngpu_pools: {}\n");
    assert!(matches!(file, FolderFile::Spec(None)), "{file:?}");
    assert!(d.items.iter().any(|i| i.code == "gpuplan::yaml::multiple_documents"), "{:#?}", d.items);
}
