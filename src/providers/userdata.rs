//! The cloud-init user-data script that runs one job on a node made for it.
//!
//! Cloud providers (AWS, Tencent, Alibaba) launch a job by creating a node of the pool's
//! shape whose user data is this script. It runs the container with the NVIDIA runtime
//! and the job's GPUs, under `timeout` when the job has a `max_runtime`, then reports
//! completion the way every cloud can read back without credentials on the node: a
//! `gpuplan-job-exit=N` line on the serial console (and in `/var/log/gpuplan-job.log`),
//! then it powers the node off, unless the pool keeps it. A provider's `job_status` maps
//! a live node to running, a node the job powered off to succeeded or failed (from the
//! console line where the cloud serves console output), and a reclaimed spot node to
//! preempted.

use super::LaunchJob;

/// The console line a finished job prints; providers parse it back with [`exit_code`].
pub const EXIT_MARKER: &str = "gpuplan-job-exit=";

/// Exit code `timeout` gives a job that ran past `max_runtime`.
pub const TIMED_OUT: i32 = 124;

/// Quote a string for a POSIX shell: single quotes, with `'` written as `'\''`.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The user-data script for one job launch.
pub fn job_script(req: &LaunchJob) -> String {
    let timeout = match req.max_runtime_secs {
        Some(secs) => format!("timeout --signal=TERM --kill-after=30s {secs}s "),
        None => String::new(),
    };
    let mut run = vec![format!("{timeout}docker run --rm --runtime=nvidia")];
    run.push(format!("--gpus {}", shell_quote(&format!("\"device={}\"", gpu_list(req.gpus)))));
    run.push(format!("--name {}", shell_quote(&container_name(req))));
    for (k, v) in &req.env {
        run.push(format!("-e {}", shell_quote(&format!("{k}={v}"))));
    }
    run.push(format!("-e GPUPLAN_JOB={}", shell_quote(&req.job.to_string())));
    run.push(format!("-e GPUPLAN_ATTEMPT={}", req.attempt));
    run.push(shell_quote(&req.image));
    for c in &req.command {
        run.push(shell_quote(c));
    }
    let finish = if req.keep_node { "# the pool keeps this node" } else { "shutdown -h now" };
    format!(
        "#!/bin/bash\n\
         # gpuplan job {job} attempt {attempt} (token {token})\n\
         set -u\n\
         exec > >(tee -a /var/log/gpuplan-job.log) 2>&1\n\
         {run}\n\
         code=$?\n\
         echo \"{EXIT_MARKER}$code\" | tee /dev/console\n\
         {finish}\n",
        job = req.job,
        attempt = req.attempt,
        token = req.token,
        run = run.join(" \\\n  "),
    )
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

    fn req() -> LaunchJob {
        LaunchJob {
            job: "job.finetune".parse().unwrap(),
            pool: "gpu_pool.train".parse().unwrap(),
            node_id: String::new(),
            image: "ghcr.io/acme/trainer:1".into(),
            command: vec!["python".into(), "train.py".into(), "--note=it's".into()],
            env: [("GPUPLAN_CHECKPOINT_URI".to_string(), "s3://ckpt/finetune".to_string())].into(),
            gpus: 2,
            attempt: 2,
            token: "tok-1".into(),
            shape: None,
            max_runtime_secs: Some(3600),
            keep_node: false,
            kube: None,
        }
    }

    #[test]
    fn script_runs_the_container_with_gpus_env_timeout_and_powers_off() {
        let s = job_script(&req());
        assert!(s.starts_with("#!/bin/bash\n"), "{s}");
        assert!(s.contains("timeout --signal=TERM --kill-after=30s 3600s docker run --rm --runtime=nvidia"), "{s}");
        assert!(s.contains("--gpus '\"device=0,1\"'"), "{s}");
        assert!(s.contains("-e GPUPLAN_CHECKPOINT_URI=s3://ckpt/finetune"), "{s}");
        assert!(s.contains("-e GPUPLAN_ATTEMPT=2"), "{s}");
        assert!(s.contains("--name gpuplan-job-finetune-2"), "{s}");
        assert!(s.contains(r"'--note=it'\''s'"), "quotes are escaped: {s}");
        assert!(s.trim_end().ends_with("shutdown -h now"), "{s}");
        let kept = job_script(&LaunchJob { keep_node: true, max_runtime_secs: None, ..req() });
        assert!(!kept.contains("shutdown") && !kept.contains("timeout"), "{kept}");
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
