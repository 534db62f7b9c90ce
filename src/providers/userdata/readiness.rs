//! The readiness check a job script runs before its job (`health { readiness }`,
//! `docs/design/gpu-health.md`): `nvidia-smi` must list every GPU the job needs, or DCGM's
//! level-1 diagnostics (`dcgmi diag -r 1`) must pass. A node that fails prints
//! `gpuplan-node-unready=<why>` on its console and log and exits [`NODE_UNREADY`], so its
//! run reads "its node failed its readiness check" ([`UNREADY`]) and gpuplan knows the node
//! failed, not the job. An image without `dcgmi` where the pool asks for DCGM is the
//! image's fault, not the node's, and so is a DCGM that does not answer (no
//! `nv-hostengine`): the script's `need` (could not run the job) says so.

use crate::model::health::Readiness;

/// Exit code of a job script whose node failed its readiness check. A job can exit with
/// any code, so the run reads it as the node's failure only with [`UNREADY_MARKER`]'s line.
/// Not 124 to 127 (`timeout`, and `docker run`'s own codes).
pub const NODE_UNREADY: i32 = 123;

/// The console line that says why the node is not ready.
pub const UNREADY_MARKER: &str = "gpuplan-node-unready=";

/// How a run's message begins when its node failed the readiness check.
pub const UNREADY: &str = "its node failed its readiness check";

/// The bash fragment that runs `check` for a job of `gpus` GPUs. It comes after the
/// prepare fragment (whose `$console` and `need` it uses); `stop` ends the node's part,
/// `exit_marker` is the job's exit line.
pub fn script(check: Readiness, gpus: u32, stop: &str, exit_marker: &str) -> String {
    let body = match check {
        Readiness::None => return String::new(),
        Readiness::NvidiaSmi => format!(
            "gpus_seen=\"$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')\"\n\
             [ \"$gpus_seen\" -ge {need} ] || unready \"nvidia-smi lists $gpus_seen of the {need} GPUs the job needs\"\n",
            need = gpus.max(1)
        ),
        Readiness::Dcgm => "command -v dcgmi >/dev/null 2>&1 || need 'readiness = \"dcgm\", but this image has no dcgmi (DCGM)'\n\
             dcgmi discovery -l >/dev/null 2>&1 || need 'readiness = \"dcgm\", but DCGM does not answer (is nv-hostengine running?)'\n\
             if ! diag=\"$(dcgmi diag -r 1 2>&1)\"; then\n\
             \x20 unready \"dcgmi diag -r 1 failed: $(printf '%s\\n' \"$diag\" | grep -i -m 3 'fail' | tr -s ' \\n' ' ')\"\n\
             fi\n"
            .to_string(),
    };
    format!(
        "unready() {{ echo \"{UNREADY_MARKER}$1\" | tee -a \"$console\"; echo \"{exit_marker}{NODE_UNREADY}\" | tee -a \"$console\"; {stop}; exit {NODE_UNREADY}; }}\n\
         echo \"gpuplan: readiness check ({name})\"\n\
         {body}",
        name = check.as_str()
    )
}

/// Why the node is not ready, when the script said so.
pub fn reason(log: &str) -> Option<String> {
    log.lines().rev().find_map(|l| l.trim().strip_prefix(UNREADY_MARKER).map(|m| m.trim().to_string()))
}

/// The run's message for exit code [`NODE_UNREADY`] with the script's reason.
pub fn message(why: &str) -> String {
    format!("{UNREADY}: {why}; the job did not run")
}

/// Whether a run's message says its node failed the readiness check (not the job).
pub fn is_node_failure(message: &str) -> bool {
    message.starts_with(UNREADY)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// Runs the fragment under bash with a stub `nvidia-smi` printing `smi` and a stub
    /// `dcgmi` of body `dcgm` (none: not installed): (exit code, stdout, console).
    fn run(check: Readiness, gpus: u32, smi: &str, dcgm: Option<&str>) -> (i32, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let mut stubs = vec![("nvidia-smi", format!("printf '%s' '{smi}'"))];
        if let Some(body) = dcgm {
            stubs.push(("dcgmi", body.to_string()));
        }
        for (name, body) in stubs {
            let path = bin.join(name);
            std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let console = dir.path().join("console");
        let text = format!(
            "console={}\nneed() {{ echo \"gpuplan-job-error=$1\"; exit 125; }}\n{}echo gpuplan-ready\n",
            console.display(),
            script(check, gpus, "true", "gpuplan-job-exit=")
        );
        let out = Command::new("bash")
            .arg("-c")
            .arg(&text)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()
            .expect("bash runs");
        let console = std::fs::read_to_string(console).unwrap_or_default();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), console)
    }

    const DCGM_PASS: &str = "echo '| Deployment | Pass |'";
    const DCGM_FAIL: &str = "[ \"$1\" = discovery ] && exit 0\necho '| GPU Memory | Fail - GPU : 0 |'; exit 226";
    const TWO: &str = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\n";

    #[test]
    fn nvidia_smi_must_list_every_gpu_the_job_needs() {
        let (code, out, _) = run(Readiness::NvidiaSmi, 2, TWO, None);
        assert_eq!(code, 0, "{out}");
        assert!(out.ends_with("gpuplan-ready\n"), "{out}");
        let (code, out, console) = run(Readiness::NvidiaSmi, 4, TWO, None);
        assert_eq!(code, NODE_UNREADY, "{out}");
        assert!(!out.contains("gpuplan-ready"), "{out}");
        let why = reason(&console).expect("the console says why");
        assert_eq!(why, "nvidia-smi lists 2 of the 4 GPUs the job needs");
        assert!(console.ends_with(&format!("gpuplan-job-exit={NODE_UNREADY}\n")), "{console}");
        assert!(is_node_failure(&message(&why)));
    }

    #[test]
    fn dcgm_level_one_must_pass_and_dcgm_must_be_installed() {
        assert_eq!(run(Readiness::Dcgm, 1, "", Some(DCGM_PASS)).0, 0);
        let (code, _, console) = run(Readiness::Dcgm, 1, "", Some(DCGM_FAIL));
        assert_eq!(code, NODE_UNREADY);
        assert_eq!(reason(&console).as_deref(), Some("dcgmi diag -r 1 failed: | GPU Memory | Fail - GPU : 0 |"));
        // No dcgmi: the image cannot run the check, which is no fault of the node.
        let (code, out, _) = run(Readiness::Dcgm, 1, "", None);
        assert_eq!(code, 125, "{out}");
        assert!(out.contains("gpuplan-job-error=readiness = \"dcgm\", but this image has no dcgmi"), "{out}");
        // DCGM installed but its host engine not running: the image's fault too.
        let (code, out, _) = run(Readiness::Dcgm, 1, "", Some("[ \"$1\" = discovery ] && exit 1\nexit 0"));
        assert_eq!(code, 125, "{out}");
        assert!(out.contains("DCGM does not answer (is nv-hostengine running?)"), "{out}");
        assert_eq!(script(Readiness::None, 8, "true", "x="), "");
    }
}
