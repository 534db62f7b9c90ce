//! EKS: pool nodes join the cluster of the pool's `kubernetes { kubeconfig }` through
//! nodeadm user data (Amazon Linux 2023 EKS AMIs): a MIME multipart document whose
//! `application/node.eks.aws` part is a `NodeConfig` with the cluster's name, API server
//! endpoint, CA and service CIDR, and gpuplan's node labels and spot taint in
//! `kubelet.flags`. The cluster's endpoint and CA come from the kubeconfig's cluster entry;
//! its name from an EKS ARN cluster name or the `--cluster-name` argument of the
//! kubeconfig's `aws eks get-token` exec plugin. The node's instance profile must have an
//! EKS access entry (one-time cluster setup, not done by gpuplan).

use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;
use serde_json::json;

use crate::providers::{ClusterJoin, ErrorClass, ProviderError};

const BOUNDARY: &str = "GPUPLAN-NODEADM";

fn bad(what: String) -> ProviderError {
    ProviderError::new(ErrorClass::Invalid, "EksJoin", what)
}

/// The nodeadm user data for one batch of nodes (plain text; the caller encodes it).
pub fn user_data(join: &ClusterJoin, dir: &Path, home: Option<&Path>) -> Result<String, ProviderError> {
    let (path, context) = crate::providers::kube::kubeconfig_of(&join.cluster_id)
        .ok_or_else(|| bad(format!("`{}` is not a kubeconfig cluster", join.cluster_id)))?;
    let file: PathBuf = match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => h.join(rest),
        _ => dir.join(path),
    };
    let text = std::fs::read_to_string(&file)
        .map_err(|e| bad(format!("cannot read the kubeconfig `{}` to join nodes: {e}", file.display())))?;
    let kc = Kubeconfig::from_yaml(&text).map_err(|e| bad(format!("kubeconfig `{}`: {e}", file.display())))?;
    node_config(&kc, context, join).map_err(|m| bad(format!("kubeconfig `{}`: {m}", file.display())))
}

fn node_config(kc: &Kubeconfig, context: Option<&str>, join: &ClusterJoin) -> Result<String, String> {
    let ctx_name =
        context.map(str::to_string).or_else(|| kc.current_context.clone()).ok_or("it has no current context")?;
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == ctx_name)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| format!("no context `{ctx_name}`"))?;
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .ok_or_else(|| format!("context `{ctx_name}` names cluster `{}`, which it does not define", ctx.cluster))?;
    let spec = cluster.cluster.as_ref().ok_or_else(|| format!("cluster `{}` is empty", cluster.name))?;
    let server = spec.server.clone().ok_or_else(|| format!("cluster `{}` has no server", cluster.name))?;
    let ca = spec
        .certificate_authority_data
        .clone()
        .ok_or_else(|| format!("cluster `{}` has no certificate-authority-data, which nodeadm needs", cluster.name))?;
    let exec_args = ctx
        .user
        .as_ref()
        .and_then(|u| kc.auth_infos.iter().find(|a| &a.name == u))
        .and_then(|a| a.auth_info.as_ref())
        .and_then(|a| a.exec.as_ref())
        .and_then(|e| e.args.clone())
        .unwrap_or_default();
    let name = eks_name(&cluster.name, &exec_args).ok_or_else(|| {
        format!(
            "cannot tell the EKS cluster's name: cluster `{}` is not an EKS ARN and its user has no `--cluster-name` (write the kubeconfig with `aws eks update-kubeconfig`)",
            cluster.name
        )
    })?;
    let cidr = join.service_cidr.clone().ok_or("no `service_cidr` for the cluster")?;
    let labels: Vec<String> = join.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut flags = vec![format!("--node-labels={}", labels.join(","))];
    if !join.taints.is_empty() {
        let taints: Vec<String> = join.taints.iter().map(|(k, v, e)| format!("{k}={v}:{e}")).collect();
        flags.push(format!("--register-with-taints={}", taints.join(",")));
    }
    let config = json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": {"name": name, "apiServerEndpoint": server, "certificateAuthority": ca, "cidr": cidr},
            "kubelet": {"flags": flags},
        },
    });
    let yaml = serde_saphyr::to_string(&config).map_err(|e| format!("cannot write the NodeConfig: {e}"))?;
    Ok(format!(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n--{BOUNDARY}\nContent-Type: application/node.eks.aws\n\n---\n{yaml}\n--{BOUNDARY}--\n"
    ))
}

/// `arn:aws:eks:us-east-1:111122223333:cluster/gpu` → `gpu`; else `--cluster-name X`
/// (or `--cluster-id X`) in the exec plugin's arguments.
fn eks_name(cluster_entry: &str, exec_args: &[String]) -> Option<String> {
    if let Some(rest) = cluster_entry.strip_prefix("arn:")
        && rest.contains(":eks:")
        && let Some((_, name)) = rest.rsplit_once(":cluster/")
    {
        return Some(name.to_string());
    }
    exec_args.windows(2).find(|w| w[0] == "--cluster-name" || w[0] == "--cluster-id").map(|w| w[1].clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1
kind: Config
current-context: gpu
clusters:
- name: arn:aws:eks:us-east-1:111122223333:cluster/gpu-prod
  cluster:
    server: https://ABC.gr7.us-east-1.eks.amazonaws.com
    certificate-authority-data: TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PQ==
- name: plain
  cluster:
    server: https://10.0.0.1
    certificate-authority-data: Q0E=
contexts:
- name: gpu
  context:
    cluster: arn:aws:eks:us-east-1:111122223333:cluster/gpu-prod
    user: eks
- name: other
  context:
    cluster: plain
    user: token-user
- name: named-by-exec
  context:
    cluster: plain
    user: eks-exec
users:
- name: eks
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args: [eks, get-token, --cluster-name, gpu-prod]
- name: token-user
  user:
    token: t
- name: eks-exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args: [eks, get-token, --cluster-name, from-exec]
";

    fn join(spot: bool) -> ClusterJoin {
        let cap = if spot { "spot" } else { "on-demand" };
        ClusterJoin {
            cluster_id: "kubeconfig:kube/config#".into(),
            service: "EKS".into(),
            labels: vec![("gpuplan.dev/pool".into(), "train".into()), ("gpuplan.dev/capacity".into(), cap.into())],
            taints: if spot {
                vec![("gpuplan.dev/capacity".into(), "spot".into(), "NoSchedule".into())]
            } else {
                vec![]
            },
            key_pair: None,
            service_cidr: Some("10.100.0.0/16".into()),
        }
    }

    /// The NodeConfig part of the MIME document, read back as JSON.
    fn config(user_data: &str) -> serde_json::Value {
        assert!(user_data.starts_with("MIME-Version: 1.0\n"), "{user_data}");
        let part = user_data.split("Content-Type: application/node.eks.aws\n\n").nth(1).expect("a nodeadm part");
        let yaml = part.split(&format!("\n--{BOUNDARY}--")).next().expect("closed");
        serde_saphyr::from_str(yaml).expect("YAML")
    }

    #[test]
    fn spot_nodes_join_with_labels_and_the_taint() {
        let kc = Kubeconfig::from_yaml(KUBECONFIG).unwrap();
        let c = config(&node_config(&kc, None, &join(true)).unwrap());
        assert_eq!(c["kind"], "NodeConfig");
        let cluster = &c["spec"]["cluster"];
        assert_eq!(cluster["name"], "gpu-prod");
        assert_eq!(cluster["apiServerEndpoint"], "https://ABC.gr7.us-east-1.eks.amazonaws.com");
        assert_eq!(cluster["certificateAuthority"], "TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PQ==");
        assert_eq!(cluster["cidr"], "10.100.0.0/16");
        let flags = &c["spec"]["kubelet"]["flags"];
        assert_eq!(flags[0], "--node-labels=gpuplan.dev/pool=train,gpuplan.dev/capacity=spot");
        assert_eq!(flags[1], "--register-with-taints=gpuplan.dev/capacity=spot:NoSchedule");
        let od = config(&node_config(&kc, None, &join(false)).unwrap());
        assert_eq!(od["spec"]["kubelet"]["flags"].as_array().map(Vec::len), Some(1), "on-demand nodes carry no taint");
    }

    #[test]
    fn the_cluster_name_comes_from_the_arn_or_the_exec_plugin_or_is_an_error() {
        let kc = Kubeconfig::from_yaml(KUBECONFIG).unwrap();
        let c = config(&node_config(&kc, Some("named-by-exec"), &join(false)).unwrap());
        assert_eq!(c["spec"]["cluster"]["name"], "from-exec");
        let err = node_config(&kc, Some("other"), &join(false)).unwrap_err();
        assert!(err.contains("cannot tell the EKS cluster's name"), "{err}");
        let err = node_config(&kc, Some("nope"), &join(false)).unwrap_err();
        assert!(err.contains("no context `nope`"), "{err}");
    }
}
