//! `deploy/kubernetes/` and the `Dockerfile`: the kustomization renders (`kubectl
//! kustomize`, the kubectl wheel in `.venv/`), every object passes the real Kubernetes
//! schemas strictly (`kubernetes-validate --strict`, for 1.33, the version gpuplan's
//! typed objects are generated for, and the newest the validator knows), the Deployment
//! keeps the properties the service relies on, `hadolint` passes the Dockerfile, and the
//! Dockerfile copies every input of the build (so the image holds the binary the tests run).
//! `scripts/test` installs the three tools into `.venv/` (`scripts/moto install`).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

const VERSIONS: [&str; 2] = ["1.33.0", "1.37.0"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tool(name: &str) -> Command {
    let path = root().join(".venv/bin").join(name);
    assert!(path.exists(), "{} is missing: run the tests with `scripts/test`, which installs it", path.display());
    Command::new(path)
}

fn rendered() -> String {
    let out = tool("kubectl").arg("kustomize").arg(root().join("deploy/kubernetes")).output().expect("kubectl runs");
    assert!(out.status.success(), "kubectl kustomize:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 manifests")
}

fn validate(file: &Path, version: &str) -> (bool, String) {
    let out = tool("kubernetes-validate")
        .args(["--strict", "-k", version])
        .arg(file)
        .output()
        .expect("kubernetes-validate runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn the_kustomization_renders_and_passes_the_kubernetes_schemas_strictly() {
    let yaml = rendered();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("gpuplan.yaml");
    std::fs::write(&file, &yaml).unwrap();
    for v in VERSIONS {
        let (ok, text) = validate(&file, v);
        assert!(ok, "Kubernetes {v}:\n{text}");
        for kind in [
            "deployment/gpuplan",
            "role/gpuplan",
            "rolebinding/gpuplan",
            "serviceaccount/gpuplan",
            "clusterrole/gpuplan-nodes",
            "clusterrolebinding/gpuplan-nodes",
        ] {
            assert!(text.contains(&format!("passed for resource {kind}")), "{kind} validated against {v}:\n{text}");
        }
        assert!(text.contains("passed for resource service/gpuplan-metrics"), "{text}");
        assert!(text.contains("passed for resource configmap/gpuplan-spec-"), "{text}");
    }
    // The validator rejects what the schema does not know: a misspelt field fails.
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(&bad, yaml.replace("readOnlyRootFilesystem", "readOnlyRootFileSystem")).unwrap();
    assert!(!validate(&bad, VERSIONS[0]).0, "strict validation catches an unknown field");
}

#[test]
fn the_deployment_runs_two_non_root_replicas_with_probes_and_a_lease_role() {
    let yaml = rendered();
    let docs: Vec<serde_json::Value> = yaml
        .split("\n---\n")
        .map(|d| serde_saphyr::from_str::<serde_json::Value>(d).expect("a YAML document"))
        .collect();
    let find = |kind: &str| docs.iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("a {kind}"));
    let d = find("Deployment");
    assert_eq!(d["spec"]["replicas"], 2);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["serviceAccountName"], "gpuplan");
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert!(c["resources"]["requests"]["cpu"].is_string() && c["resources"]["requests"]["memory"].is_string());
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    for want in ["reconcile", "--leader-elect", "--metrics-addr"] {
        assert!(args.contains(&want), "{args:?}");
    }
    assert_eq!(c["env"][0]["name"], "POD_NAME", "the lease identity is the pod's name");
    assert_eq!(c["envFrom"][0]["secretRef"]["name"], "gpuplan-cloud-credentials");
    // The spec comes from the generated ConfigMap.
    let cm = find("ConfigMap");
    assert!(cm["data"]["main.hcl"].as_str().unwrap().contains("gpu_pool"));
    assert_eq!(pod["volumes"][0]["configMap"]["name"], cm["metadata"]["name"]);
    // The Role lets it hold the Lease (get, create, update); cluster-wide it reads a
    // Node (which cloud instance a job's pod runs on), lists them (GPU health) and cordons one.
    let role = find("Role");
    let lease = role["rules"].as_array().unwrap().iter().find(|r| r["resources"][0] == "leases").expect("a lease rule");
    assert_eq!(lease["verbs"], serde_json::json!(["get", "create", "update"]));
    let cluster = find("ClusterRole");
    assert_eq!(
        cluster["rules"],
        serde_json::json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}])
    );
    assert_eq!(docs.iter().filter(|d| d["kind"] == "ClusterRole").count(), 1);
    assert_eq!(find("ClusterRoleBinding")["subjects"][0]["namespace"], "gpuplan");
    let svc = find("Service");
    assert_eq!(svc["spec"]["ports"][0]["port"], 9464);
}

#[test]
fn the_example_spec_of_the_deployment_is_valid() {
    let out = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .args(["-C"])
        .arg(root().join("deploy/kubernetes/spec"))
        .arg("validate")
        .env("NO_COLOR", "1")
        .output()
        .expect("gpuplan runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_dockerfile_passes_hadolint_and_runs_as_non_root() {
    let file = root().join("Dockerfile");
    let out = tool("hadolint").arg(&file).output().expect("hadolint runs");
    assert!(out.status.success(), "hadolint:\n{}", String::from_utf8_lossy(&out.stdout));
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().filter(|l| l.starts_with("FROM ")).count(), 2, "multi-stage");
    assert!(text.lines().any(|l| l.trim() == "USER 65532:65532"), "non-root");
}

/// The image is built from what the tests build: the build stage copies every input cargo
/// reads for the binary (manifest, lock file, build script, sources, the folder of the
/// bench targets the manifest declares, and every file the code includes from outside
/// `src/`), and `.dockerignore` keeps none of them out. (No Docker engine here: this
/// reads both files.)
#[test]
fn the_dockerfile_copies_every_input_of_the_build() {
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let build_stage: Vec<&str> = dockerfile
        .lines()
        .skip_while(|l| !l.starts_with("FROM "))
        .skip(1)
        .take_while(|l| !l.starts_with("FROM "))
        .collect();
    let copied: Vec<String> = build_stage
        .iter()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.contains("--from"))
        .flat_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words[..words.len().saturating_sub(1)]
                .iter()
                .map(|w| w.trim_end_matches('/').to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).unwrap_or_default();
    let ignored: Vec<&str> = ignore.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let inputs = cargo_inputs();
    assert!(inputs.contains("build.rs") && inputs.contains("policies"), "the inputs found: {inputs:?}");
    for input in &inputs {
        let covered = copied.iter().any(|c| c == input || input.starts_with(&format!("{c}/")));
        assert!(covered, "the Dockerfile's build stage does not copy `{input}` (copied: {copied:?})");
        let parts: Vec<&str> = input.split('/').collect();
        for pattern in &ignored {
            let hit = (1..=parts.len()).any(|n| glob(pattern, &parts[..n].join("/")));
            assert!(!hit, "`.dockerignore` pattern `{pattern}` keeps `{input}` out of the build");
        }
    }
}

/// What cargo reads to build the package's binary, as paths from the repository root.
fn cargo_inputs() -> BTreeSet<String> {
    let mut inputs: BTreeSet<String> = ["Cargo.toml", "Cargo.lock", "src"].map(String::from).into();
    // Cargo runs `build.rs` whenever the package has one.
    if root().join("build.rs").exists() {
        inputs.insert("build.rs".into());
    }
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    // Declared bench targets must exist for the manifest to load; declared paths too.
    if manifest.lines().any(|l| l.trim() == "[[bench]]") {
        inputs.insert("benches".into());
    }
    for l in manifest.lines().filter_map(|l| l.trim().strip_prefix("path = \"")) {
        inputs.insert(l.split('/').next().unwrap().trim_end_matches('"').to_string());
    }
    let mut files = vec![root().join("src")];
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        // Test modules are not part of the binary.
        let test_only = name == "tests.rs"
            || name.ends_with("_tests.rs")
            || p.strip_prefix(root()).unwrap().components().any(|c| c.as_os_str() == "tests");
        if !name.ends_with(".rs") || test_only {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        for macro_name in ["include_str!(\"", "include_bytes!(\""] {
            for rest in text.split(macro_name).skip(1) {
                let Some((rel, _)) = rest.split_once('"') else { continue };
                let mut full = PathBuf::new();
                for c in p.parent().unwrap().join(rel).components() {
                    match c {
                        Component::ParentDir => {
                            full.pop();
                        }
                        Component::CurDir => {}
                        other => full.push(other),
                    }
                }
                let from_root = full.strip_prefix(root()).expect("an include inside the repository");
                inputs.insert(from_root.components().next().unwrap().as_os_str().to_string_lossy().to_string());
            }
        }
    }
    inputs
}

/// A `.dockerignore` pattern against a path: `*` matches within one path component.
fn glob(pattern: &str, path: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == path,
        Some((head, tail)) => {
            let Some(rest) = path.strip_prefix(head) else { return false };
            (0..=rest.len()).take_while(|&i| !rest[..i].contains('/')).any(|i| glob(tail, &rest[i..]))
        }
    }
}
