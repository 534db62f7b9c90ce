//! What starts a reconcile pass besides the interval: a change to the spec folder
//! (edited, or swapped by a ConfigMap update or a git-sync checkout), and a gpuplan job
//! pod that the cluster cannot schedule (pools with a `kubernetes {}` block; the watch
//! itself is kube-rs's, in `providers::kube::watch`).
//!
//! The folder is polled, not watched through inotify: a ConfigMap volume changes by
//! swapping a symlink (`..data`) and a git-sync checkout by renaming a worktree, which
//! file-event watchers report as events on other paths, or not at all across the
//! symlink. Each poll hashes the content of the spec and var files
//! (`spec::spec_and_var_files`, through symlinks: an `*.auto.vars.hcl` changes what a pass
//! plans), which are small; a change counts once the folder has stayed the same for
//! one more poll (a checkout that writes many files makes one trigger, not one per
//! file). A trigger only wakes the loop: passes never overlap, and triggers that arrive
//! during a pass make one more pass after it ([`tokio::sync::Notify`] keeps one permit).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

pub use crate::providers::kube::watch::WatchTarget;

/// How often the folder is looked at; a change starts a pass within about two polls.
pub const POLL: Duration = Duration::from_millis(500);

/// A fingerprint of the spec files' names and content, and of the `--var-file`s named on
/// the command line (`extra`, wherever they are); `None` when one cannot be read (the
/// folder is being replaced): no trigger until it reads again.
pub fn fingerprint(dir: &Path, extra: &[PathBuf]) -> Option<[u8; 32]> {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    // A folder or file that cannot be read right now (a ConfigMap being swapped, a
    // git-sync checkout mid-move) has no fingerprint: deliberately not an error, since no
    // pass is triggered by it and the next check, or the interval timer, reads it again;
    // the pass itself reports any real read error.
    let files = crate::spec::spec_and_var_files(dir).ok()?;
    for file in files.iter().chain(extra) {
        let bytes = std::fs::read(file).ok()?;
        hash.update(file.as_os_str().as_encoded_bytes());
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    Some(hash.finalize().into())
}

/// Watch `dir` and the `var_files` outside it until the task is dropped or aborted,
/// notifying `wake` once per settled change. `said` is called with the folder on each
/// trigger (for the log).
pub fn watch_spec_folder(
    dir: PathBuf,
    var_files: Vec<PathBuf>,
    wake: Arc<Notify>,
    said: impl Fn(&Path) + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = fingerprint(&dir, &var_files);
        loop {
            tokio::time::sleep(POLL).await;
            let Some(now) = fingerprint(&dir, &var_files) else { continue };
            if Some(now) == last {
                continue;
            }
            // Settle: wait until one poll sees no further change.
            let mut settled = now;
            loop {
                tokio::time::sleep(POLL).await;
                match fingerprint(&dir, &var_files) {
                    Some(again) if again == settled => break,
                    Some(again) => settled = again,
                    None => {}
                }
            }
            // A file rewritten with the same content (seen half written in between) is
            // no change.
            if last.replace(settled) == Some(settled) {
                continue;
            }
            said(&dir);
            wake.notify_one();
        }
    })
}

/// The clusters and namespaces whose job pods to watch: every `kubernetes {}` block with
/// a `kubeconfig` file (relative to `dir`, `~/` to `home`). Blocks naming a `cluster_id`
/// are left out: their kubeconfig comes from a cloud API at plan time.
pub fn pod_targets(spec: &crate::spec::Spec, dir: &Path, home: Option<&Path>) -> Vec<WatchTarget> {
    let mut out: Vec<WatchTarget> = spec
        .gpu_pools
        .values()
        .filter_map(|p| p.kubernetes.as_ref())
        .filter_map(|k| {
            let file = &k.kubeconfig.as_ref()?.value;
            let kubeconfig = match (file.strip_prefix("~/"), home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => dir.join(file),
            };
            Some(WatchTarget {
                kubeconfig,
                context: k.context.as_ref().map(|c| c.value.clone()),
                namespace: k.namespace.value.clone(),
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Watch every target's job pods, notifying `wake` when one turns unschedulable. `said`
/// gets a line for the log (a pod waiting, or a watch that failed and is retried).
pub fn watch_pods(
    targets: Vec<WatchTarget>,
    wake: Arc<Notify>,
    said: impl Fn(String) + Clone + Send + Sync + 'static,
) -> Vec<tokio::task::JoinHandle<()>> {
    targets
        .into_iter()
        .map(|t| {
            let (wake, said, failed) = (wake.clone(), said.clone(), said.clone());
            let ns = t.namespace.clone();
            let ns2 = ns.clone();
            tokio::spawn(crate::providers::kube::watch::watch_unschedulable(
                t,
                move |pod| {
                    said(format!("Job pod `{ns}/{pod}` is waiting for nodes (unschedulable): starting a pass\n"));
                    wake.notify_one();
                },
                move |why| failed(format!("warning: watching job pods in `{ns2}`: {why}; retrying\n")),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// A pass plans with the folder's var files, so a change to one wakes the loop; a
    /// file of another kind does not.
    #[test]
    fn the_fingerprint_covers_spec_and_var_files_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");
        write("main.hcl", "provider \"sim\" {}\n");
        write("prod.auto.vars.hcl", "nodes = 1\n");
        let first = super::fingerprint(dir.path(), &[]).expect("readable");
        write("README.txt", "notes");
        assert_eq!(super::fingerprint(dir.path(), &[]), Some(first));
        write("prod.auto.vars.hcl", "nodes = 2\n");
        let second = super::fingerprint(dir.path(), &[]).expect("readable");
        assert_ne!(second, first);
        write("main.hcl", "provider \"sim\" {}\n# edited\n");
        assert_ne!(super::fingerprint(dir.path(), &[]), Some(second));
    }

    /// `reconcile --var-file ../prod.vars.hcl`: the file lives outside the folder, and a
    /// change to it changes what a pass plans, so it wakes the loop too.
    #[test]
    fn the_fingerprint_covers_var_files_outside_the_folder() {
        let root = tempfile::tempdir().expect("tempdir");
        let spec = root.path().join("spec");
        std::fs::create_dir(&spec).expect("mkdir");
        std::fs::write(spec.join("main.hcl"), "provider \"sim\" {}\n").expect("write");
        let vars = root.path().join("prod.vars.hcl");
        std::fs::write(&vars, "nodes = 1\n").expect("write");
        let extra = [vars.clone()];
        let first = super::fingerprint(&spec, &extra).expect("readable");
        assert_eq!(super::fingerprint(&spec, &extra), Some(first));
        std::fs::write(&vars, "nodes = 2\n").expect("write");
        assert_ne!(super::fingerprint(&spec, &extra), Some(first));
        // A var file that cannot be read (being replaced) gives no fingerprint: no trigger.
        std::fs::remove_file(&vars).expect("rm");
        assert_eq!(super::fingerprint(&spec, &extra), None);
    }
}
