//! The cloud-init user-data script that runs one job on a node made for it.
//!
//! Cloud providers (AWS, Tencent, Alibaba) launch a job by creating a node of the pool's
//! shape whose user data is this script. It runs the container with the NVIDIA runtime
//! and the job's GPUs, under `timeout` when the job has a `max_runtime`, then reports
//! completion the way every cloud can read back without credentials on the node: a
//! `gpuplan-job-exit=N` line on the serial console (and in `/var/log/gpuplan-job.log`),
//! then it powers the node off, unless the pool keeps it (a warm node running the job
//! through the cloud's run-command API: the script then exits with the job's code).
//! Before the job, [`prepare_script`] installs what an image without a GPU stack lacks.
//! A provider's `job_status` maps
//! a live node to running, a node the job powered off to succeeded or failed (from the
//! console line where the cloud serves console output), and a reclaimed spot node to
//! preempted.

use super::job_env;
use super::{LaunchJob, ProviderError};

pub mod secrets;

pub mod readiness;
pub use readiness::{NODE_UNREADY, UNREADY_MARKER};

/// How long a job node may take from its launch to start its job script (boot, cloud-init,
/// user data). Where gpuplan can see that the script never ran (the node's run-command
/// agent answers and the node has no job log), the run fails past it and its node is
/// terminated (see [`super::boot`]).
pub const BOOT_DEADLINE_SECS: u64 = 15 * 60;

/// The job's log on its node; the script's first step creates it (see [`super::boot`]).
pub const JOB_LOG: &str = "/var/log/gpuplan-job.log";

/// The console line a finished job prints; providers parse it back with [`exit_code`].
pub const EXIT_MARKER: &str = "gpuplan-job-exit=";

/// Exit code `timeout` gives a job that ran past `max_runtime`.
pub const TIMED_OUT: i32 = 124;

/// Exit code of a node that cannot run the job (no NVIDIA driver or container runtime,
/// and none could be installed); the reason follows [`ERROR_MARKER`].
pub const NOT_RUNNABLE: i32 = 125;
/// The console line that says why a node could not run its job.
pub const ERROR_MARKER: &str = "gpuplan-job-error=";

/// Quote a string for a POSIX shell: single quotes, with `'` written as `'\''`.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The user-data script for one job launch; `Err` when a secret of it cannot be
/// delivered by a script ([`secrets`]).
pub fn job_script(req: &LaunchJob) -> Result<String, ProviderError> {
    job_script_with(req, &|name| std::env::var(name).ok())
}

/// [`job_script`] with gpuplan's environment given (what `env:` secrets read).
pub fn job_script_with(req: &LaunchJob, env: &dyn Fn(&str) -> Option<String>) -> Result<String, ProviderError> {
    let (secret_lines, secret_args) = secrets::steps_with(req, env)?;
    let timeout = match req.max_runtime_secs {
        Some(secs) => format!("timeout --signal=TERM --kill-after=30s {secs}s "),
        None => String::new(),
    };
    let mut run = vec![format!("{timeout}docker run --rm --runtime=nvidia")];
    run.push(format!("--gpus {}", shell_quote(&format!("\"device={}\"", gpu_list(req.gpus)))));
    run.push(format!("--name {}", shell_quote(&container_name(req))));
    let rank = job_env::node_rank(&req.env);
    if rank.is_some() {
        // A multi-node job's replicas reach each other on the nodes' own addresses.
        run.push("--network host".into());
    }
    for (k, v) in &req.env {
        run.push(format!("-e {}", shell_quote(&format!("{k}={v}"))));
    }
    if rank == Some(0) && !req.env.contains_key(job_env::ENV_MASTER_ADDR) {
        // Replica 0 is the rendezvous: its own private address, read on the node.
        run.push(format!("-e {}=\"$(hostname -I | awk '{{print $1}}')\"", job_env::ENV_MASTER_ADDR));
    }
    run.extend(secret_args);
    run.push(format!("-e GPUPLAN_JOB={}", shell_quote(&req.job.to_string())));
    run.push(format!("-e GPUPLAN_ATTEMPT={}", req.attempt));
    run.push(shell_quote(&req.image));
    for c in &req.command {
        run.push(shell_quote(c));
    }
    // A kept node (a warm node running the job through run-command) ends the script with
    // the job's exit code, which the cloud's run-command API reports.
    let finish = if req.keep_node { "exit \"$code\"" } else { "shutdown -h now" };
    // What the job needs on the node: the NVIDIA driver and a container runtime with the
    // NVIDIA runtime. GPU images have them; on others the script installs them from the
    // distribution's packages, and when that fails the job ends with the reason, not a hang.
    let stop = if req.keep_node { "true" } else { "shutdown -h now" };
    let needs = prepare_script(stop);
    // Then the pool's readiness check: a node that fails it exits NODE_UNREADY, before
    // the job, so the run says the node failed (see `readiness`).
    let ready = readiness::script(req.readiness, req.gpus, stop, EXIT_MARKER);
    Ok(format!(
        "#!/bin/bash\n\
         # gpuplan job {job} attempt {attempt} (token {token})\n\
         set -u\n\
         exec > >(tee -a {JOB_LOG}) 2>&1\n\
         {needs}\
         {ready}\
         {secret_lines}\
         {run}\n\
         code=$?\n\
         echo \"{EXIT_MARKER}$code\" | tee /dev/console\n\
         {finish}\n",
        job = req.job,
        attempt = req.attempt,
        token = req.token,
        run = run.join(" \\\n  "),
    ))
}

/// Package names per distribution family: (family, `ID`/`ID_LIKE` words of
/// `/etc/os-release`, driver packages, container-toolkit packages). The families are those
/// of the clouds' GPU images: Ubuntu (apt), Alibaba Cloud Linux and the CentOS-like ones
/// (dnf, else yum), TencentOS (dnf, else yum). The names are the distributions' (and the
/// vendors' mirrors') as documented, not tried here on a GPU VM.
const DRIVER_FAMILIES: &[(&str, &str, &str, &str)] = &[
    ("ubuntu", "ubuntu", "ubuntu-drivers-common", "nvidia-container-toolkit"),
    ("tencentos", "tencentos opencloudos", "nvidia-driver nvidia-driver-cuda", "nvidia-container-toolkit"),
    (
        "rhel",
        "alinux anolis centos rhel rocky almalinux fedora",
        "nvidia-driver nvidia-driver-cuda",
        "nvidia-container-toolkit",
    ),
];

/// The part of the job script that makes the node able to run a GPU container, as a
/// bash fragment: Docker when missing; the NVIDIA driver when `nvidia-smi` fails, and the
/// NVIDIA Container Toolkit when Docker has no NVIDIA runtime, both from the distribution's
/// packages for the families in [`DRIVER_FAMILIES`]. What cannot be installed ends the
/// job with `gpuplan-job-error=driver install failed: …` (the step that failed, and the
/// OS) and exit code [`NOT_RUNNABLE`], which every provider reads back into the run's
/// state. `stop` ends the node's part (`shutdown -h now`, or `true` on a kept node).
///
/// `GPUPLAN_ROOT` (prefix of `/etc/os-release`) and `GPUPLAN_CONSOLE` (instead of
/// `/dev/console`) exist for the tests, which run every branch in a fake root with stub
/// package managers on `PATH`; nodes never set them.
pub fn prepare_script(stop: &str) -> String {
    let mut families = String::new();
    for (family, words, _, _) in DRIVER_FAMILIES {
        let pats: Vec<String> = words.split(' ').map(|w| format!("*\" {w} \"*")).collect();
        families += &format!("    {}) echo {family} ;;\n", pats.join("|"));
    }
    let mut packages = String::new();
    for (family, _, driver, toolkit) in DRIVER_FAMILIES {
        packages += &format!("    {family}) driver_pkgs='{driver}'; toolkit_pkgs='{toolkit}' ;;\n");
    }
    format!(
        r#"export DEBIAN_FRONTEND=noninteractive
console="${{GPUPLAN_CONSOLE:-/dev/console}}"
need() {{ echo "{ERROR_MARKER}$1" | tee -a "$console"; echo "{EXIT_MARKER}{NOT_RUNNABLE}" | tee -a "$console"; {stop}; exit {NOT_RUNNABLE}; }}
os_id=unknown
os_like=''
os_name='an unknown OS'
if [ -r "${{GPUPLAN_ROOT:-}}/etc/os-release" ]; then
  # shellcheck disable=SC1091
  os_id="$(. "${{GPUPLAN_ROOT:-}}/etc/os-release" && echo "${{ID:-unknown}}")"
  # shellcheck disable=SC1091
  os_like="$(. "${{GPUPLAN_ROOT:-}}/etc/os-release" && echo "${{ID_LIKE:-}}")"
  # shellcheck disable=SC1091
  os_name="$(. "${{GPUPLAN_ROOT:-}}/etc/os-release" && echo "${{PRETTY_NAME:-$os_id}}")"
fi
family="$(case " $os_id $os_like " in
{families}    *) echo unknown ;;
  esac)"
driver_pkgs=''
toolkit_pkgs=''
case "$family" in
{packages}esac
failed=''
step() {{ "$@" || {{ failed="\`$*\` exited $?"; return 1; }}; }}
pkg() {{
  if [ "$family" = ubuntu ]; then step apt-get install -y "$@"
  elif command -v dnf >/dev/null 2>&1; then step dnf install -y "$@"
  elif command -v yum >/dev/null 2>&1; then step yum install -y "$@"
  else failed="no dnf or yum on $os_name"; return 1
  fi
}}
install_driver() {{
  [ "$family" != unknown ] || {{ failed="gpuplan installs it on Ubuntu, Alibaba Cloud Linux, CentOS-like systems and TencentOS, not on $os_name"; return 1; }}
  if [ "$family" = ubuntu ]; then step apt-get update || return 1; fi
  # shellcheck disable=SC2086
  pkg $driver_pkgs || return 1
  if [ "$family" = ubuntu ]; then step ubuntu-drivers install --gpgpu || return 1; fi
  modprobe nvidia >/dev/null 2>&1 || true
}}
install_toolkit() {{
  [ "$family" != unknown ] || {{ failed="no NVIDIA Container Toolkit packages known for $os_name"; return 1; }}
  if [ "$family" = ubuntu ]; then step apt-get update || return 1; fi
  # shellcheck disable=SC2086
  pkg $toolkit_pkgs && step nvidia-ctk runtime configure --runtime=docker && step systemctl restart docker
}}
driver_ok() {{ command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; }}
if ! command -v docker >/dev/null 2>&1; then
  if command -v dnf >/dev/null 2>&1; then dnf install -y docker; elif command -v apt-get >/dev/null 2>&1; then apt-get update && apt-get install -y docker.io; fi >/dev/null 2>&1
  systemctl start docker >/dev/null 2>&1
fi
command -v docker >/dev/null 2>&1 || need 'no container runtime (docker) on this image and it could not be installed'
if ! driver_ok; then
  echo "gpuplan: no working NVIDIA driver; installing it from the $os_name packages"
  install_driver || need "driver install failed: $failed"
  driver_ok || need "driver install failed: nvidia-smi still fails after installing $driver_pkgs on $os_name"
fi
if ! docker info 2>/dev/null | grep -qi nvidia; then
  echo "gpuplan: docker has no NVIDIA runtime; installing the NVIDIA Container Toolkit"
  install_toolkit || need "driver install failed: container toolkit: $failed"
  docker info 2>/dev/null | grep -qi nvidia || need "driver install failed: docker still has no NVIDIA runtime after installing $toolkit_pkgs on $os_name"
fi
"#
    )
}

/// The job's own output in a node's log or console: every line but gpuplan's exit line.
pub fn job_output(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.starts_with(EXIT_MARKER))
}

/// Why the node could not run its job, when the script said so.
pub fn job_error(console: &str) -> Option<String> {
    console.lines().rev().find_map(|l| l.trim().strip_prefix(ERROR_MARKER).map(|m| m.trim().to_string()))
}

/// What a job's exit code means, for its run's message.
pub fn exit_message(code: i32, log: &str, how: &str) -> String {
    match code {
        0 => format!("exited 0 ({how})"),
        TIMED_OUT => format!("timed out (max_runtime; {how})"),
        NOT_RUNNABLE => match job_error(log) {
            Some(why) => format!("the node could not run the job: {why}"),
            None => format!("exited {code} ({how})"),
        },
        NODE_UNREADY => match readiness::reason(log) {
            Some(why) => readiness::message(&why),
            None => format!("exited {code} ({how})"),
        },
        c => format!("exited {c} ({how})"),
    }
}

/// The exit code a finished job printed, read from a node's console output.
pub fn exit_code(console: &str) -> Option<i32> {
    console.lines().rev().find_map(|l| l.trim().strip_prefix(EXIT_MARKER)?.trim().parse().ok())
}

fn gpu_list(gpus: u32) -> String {
    (0..gpus.max(1)).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
}

fn container_name(req: &LaunchJob) -> String {
    let base: String =
        req.job.to_string().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    format!("gpuplan-{base}-{}", req.attempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn req() -> LaunchJob {
        LaunchJob {
            job: "job.finetune".parse().unwrap(),
            pool: "gpu_pool.train".parse().unwrap(),
            node_id: String::new(),
            region: String::new(),
            image: "ghcr.io/acme/trainer:1".into(),
            command: vec!["python".into(), "train.py".into(), "--note=it's".into()],
            env: [("GPUPLAN_CHECKPOINT_URI".to_string(), "s3://ckpt/finetune".to_string())].into(),
            secrets: Default::default(),
            gpus: 2,
            attempt: 2,
            token: "tok-1".into(),
            shape: None,
            max_runtime_secs: Some(3600),
            keep_node: false,
            kube: None,
            readiness: Default::default(),
        }
    }

    #[test]
    fn script_runs_the_container_with_gpus_env_timeout_and_powers_off() {
        let s = job_script(&req()).expect("a script");
        assert!(s.starts_with("#!/bin/bash\n"), "{s}");
        assert!(s.contains("timeout --signal=TERM --kill-after=30s 3600s docker run --rm --runtime=nvidia"), "{s}");
        assert!(s.contains("--gpus '\"device=0,1\"'"), "{s}");
        assert!(s.contains("-e GPUPLAN_CHECKPOINT_URI=s3://ckpt/finetune"), "{s}");
        assert!(s.contains("-e GPUPLAN_ATTEMPT=2"), "{s}");
        assert!(s.contains("--name gpuplan-job-finetune-2"), "{s}");
        assert!(s.contains(r"'--note=it'\''s'"), "quotes are escaped: {s}");
        assert!(s.trim_end().ends_with("shutdown -h now"), "{s}");
        let kept = job_script(&LaunchJob { keep_node: true, max_runtime_secs: None, ..req() }).expect("a script");
        assert!(!kept.contains("shutdown") && !kept.contains("timeout"), "{kept}");
        // Both variants are valid bash, and check the driver and runtime first.
        for script in [&s, &kept] {
            assert!(script.contains("command -v nvidia-smi") && script.contains("grep -qi nvidia"), "{script}");
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("job.sh");
            std::fs::write(&path, script).unwrap();
            let out = std::process::Command::new("bash").arg("-n").arg(&path).output().expect("bash runs");
            assert!(out.status.success(), "{}\n{script}", String::from_utf8_lossy(&out.stderr));
        }
    }

    #[test]
    fn a_multi_node_replica_shares_the_host_network_and_replica_0_reads_its_own_address() {
        let rank = |r: &str, master: Option<&str>| {
            let mut req = req();
            req.env.insert("GPUPLAN_NNODES".into(), "2".into());
            req.env.insert("GPUPLAN_NODE_RANK".into(), r.into());
            if let Some(m) = master {
                req.env.insert("GPUPLAN_MASTER_ADDR".into(), m.into());
            }
            job_script(&req).expect("a script")
        };
        let first = rank("0", None);
        assert!(first.contains("--network host"), "{first}");
        assert!(first.contains("-e GPUPLAN_MASTER_ADDR=\"$(hostname -I | awk '{print $1}')\""), "{first}");
        let second = rank("1", Some("10.0.1.7"));
        assert!(second.contains("-e GPUPLAN_MASTER_ADDR=10.0.1.7") && !second.contains("hostname -I"), "{second}");
        let single = job_script(&req()).expect("a script");
        assert!(!single.contains("--network host") && !single.contains("MASTER_ADDR"), "{single}");
        // Valid bash.
        let out = std::process::Command::new("bash").args(["-n", "-c", &first]).output().expect("bash runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    #[test]
    fn exit_code_is_read_back_from_console_output() {
        assert_eq!(exit_code("boot\ngpuplan-job-exit=0\n"), Some(0));
        assert_eq!(exit_code("gpuplan-job-exit=1\nlater\ngpuplan-job-exit=124\r\n"), Some(TIMED_OUT));
        assert_eq!(exit_code("still running"), None);
    }

    #[test]
    fn shell_quote_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(shell_quote("abc-1.2"), "abc-1.2");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
    }
}

#[cfg(test)]
mod driver_tests;

#[cfg(test)]
mod needs_tests {
    use super::*;

    #[test]
    fn a_node_without_what_the_job_needs_says_why() {
        let console =
            "boot\ngpuplan-job-error=no working NVIDIA driver on this image (nvidia-smi fails)\ngpuplan-job-exit=125\n";
        assert_eq!(exit_code(console), Some(NOT_RUNNABLE));
        assert_eq!(
            exit_message(NOT_RUNNABLE, console, "console output"),
            "the node could not run the job: no working NVIDIA driver on this image (nvidia-smi fails)"
        );
        assert_eq!(exit_message(3, "gpuplan-job-exit=3", "console output"), "exited 3 (console output)");
    }
}
