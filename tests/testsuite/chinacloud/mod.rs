//! Tencent Cloud and Alibaba Cloud providers against local fake endpoints: the fakes
//! (`tencent_fake.rs`, `alibaba_fake.rs`) run in this test process on 127.0.0.1 and
//! verify every request's signature; the CLI runs as a child process with credentials
//! in its environment and the endpoint in the spec. Nothing sleeps for a fixed time.

mod adopt;
mod alibaba;
mod alibaba_deployment_fake;
mod alibaba_fake;
mod alibaba_secrets;
mod credentials;
mod groups;
mod identity;
mod job_nodes;
mod kube_join;
mod live_prices;
mod quotas;
mod reservations;
mod secret_launch;
mod server;
mod stopped_nodes;
mod tencent;
mod tencent_fake;
mod tencent_hpc_fake;
mod tencent_secrets;
mod validate;

use std::path::Path;
use std::process::Stdio;

/// A spec directory of its own, with `state/` beside it.
pub struct Fleet {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    #[track_caller]
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(self.code, code, "exit code\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr);
        self
    }
}

impl Fleet {
    pub fn new(spec: &str, env: &[(&str, &str)]) -> Fleet {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("main.hcl"), spec).expect("write spec");
        Fleet { dir, env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[])
    }

    /// [`Fleet::run`] with more environment variables for this run.
    pub fn run_env(&self, args: &[&str], extra: &[(&str, &str)]) -> Run {
        let out = assert_cmd::Command::from_std(self.command(extra)).args(args).output().expect("gpuplan runs");
        Run {
            code: out.status.code().expect("exit code"),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// gpuplan running in the background with `args` (a test can kill it).
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        let mut cmd = self.command(&[]);
        cmd.args(args).stdout(Stdio::null()).stderr(Stdio::null());
        cmd.spawn().expect("gpuplan starts")
    }

    fn command(&self, extra: &[(&str, &str)]) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gpuplan"));
        cmd.current_dir(self.path()).env("NO_COLOR", "1").env("COLUMNS", "100");
        for (k, _) in std::env::vars().filter(|(k, _)| {
            k.starts_with("GPUPLAN_")
                || k.starts_with("TENCENTCLOUD_")
                || k.starts_with("ALIBABA_CLOUD_")
                || k.starts_with("TKE_")
        }) {
            cmd.env_remove(k);
        }
        // No instance metadata unless a test serves it (the discard port refuses at once).
        cmd.env("GPUPLAN_TENCENTCLOUD_METADATA_ENDPOINT", "http://127.0.0.1:9")
            .env("GPUPLAN_ALICLOUD_METADATA_ENDPOINT", "http://127.0.0.1:9");
        for (k, v) in self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(extra.iter().copied()) {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Every file under the fleet directory (state, journal, backups, saved plans).
    pub fn all_files_text(&self) -> String {
        fn walk(p: &Path, out: &mut String) {
            for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
                let path = e.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if let Ok(bytes) = std::fs::read(&path) {
                    out.push_str(&String::from_utf8_lossy(&bytes));
                }
            }
        }
        let mut s = String::new();
        walk(self.path(), &mut s);
        s
    }
}

/// One pool of `desired` nodes over `zones` with a spot mix.
pub fn pool(provider: &str, zones: &[&str], gpu: &str, itype: &str, desired: u32, mix: &str) -> String {
    let zones: Vec<String> = zones.iter().map(|z| format!("{z:?}")).collect();
    format!(
        r#"
gpu_pool "train" {{
  provider       = "{provider}"
  zones          = [{}]
  gpu            = "{gpu}"
  gpus_per_node  = 1
  instance_types = ["{itype}"]

  nodes {{
    min     = 0
    desired = {desired}
    max     = 16
  }}

  mix {{
{mix}
  }}
}}
"#,
        zones.join(", ")
    )
}
