//! Every branch of [`prepare_script`] run in a fake root: a fake `/etc/os-release` and stub
//! package managers, `nvidia-smi` and `docker` on `PATH` that log their calls, and the
//! generated job scripts checked by `shellcheck`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

/// Stub commands: each logs `name args` to `$GPUPLAN_ROOT/calls`, then behaves as below.
/// Installing driver packages makes `nvidia-smi` work, installing the toolkit gives docker
/// its NVIDIA runtime; `FAIL_INSTALL=1` makes every package install fail with 100 and
/// `NO_MODULE=1` installs a driver whose `nvidia-smi` still fails.
const STUBS: &[(&str, &str)] = &[
    ("apt-get", "case \"$*\" in *install*) [ -z \"${FAIL_INSTALL:-}\" ] || exit 100;; esac\ninstalled \"$*\""),
    ("dnf", "[ -z \"${FAIL_INSTALL:-}\" ] || exit 100\ninstalled \"$*\""),
    ("yum", "[ -z \"${FAIL_INSTALL:-}\" ] || exit 100\ninstalled \"$*\""),
    ("ubuntu-drivers", "[ -n \"${NO_MODULE:-}\" ] || touch \"$GPUPLAN_ROOT/driver\""),
    ("nvidia-smi", "[ -e \"$GPUPLAN_ROOT/driver\" ]"),
    (
        "docker",
        "if [ -e \"$GPUPLAN_ROOT/toolkit\" ]; then echo 'Runtimes: nvidia runc'; else echo 'Runtimes: runc'; fi",
    ),
    ("nvidia-ctk", "true"),
    ("systemctl", "true"),
    ("modprobe", "true"),
];

struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn new(os_release: Option<&str>, skip: &[&str]) -> Root {
        let dir = tempfile::tempdir().expect("a temp dir");
        if let Some(text) = os_release {
            std::fs::create_dir_all(dir.path().join("etc")).unwrap();
            std::fs::write(dir.path().join("etc/os-release"), text).unwrap();
        }
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for (name, body) in STUBS.iter().filter(|(n, _)| !skip.contains(n)) {
            let script = format!(
                "#!/bin/bash\necho \"{name} $*\" >> \"$GPUPLAN_ROOT/calls\"\n\
                 installed() {{ case \"$1\" in *nvidia-driver*) [ -n \"${{NO_MODULE:-}}\" ] || touch \"$GPUPLAN_ROOT/driver\";; esac; \
                 case \"$1\" in *nvidia-container-toolkit*) touch \"$GPUPLAN_ROOT/toolkit\";; esac; }}\n{body}\n"
            );
            let path = bin.join(name);
            std::fs::write(&path, script).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Root { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn touch(&self, name: &str) {
        std::fs::write(self.path().join(name), "").unwrap();
    }

    /// Run the prepare fragment, then `echo gpuplan-ready`: (exit code, stdout, calls).
    fn run(&self, env: &[(&str, &str)]) -> (i32, String, String) {
        let script = format!("{}echo gpuplan-ready\n", prepare_script("true"));
        let file = self.path().join("prepare.sh");
        std::fs::write(&file, script).unwrap();
        let mut cmd = Command::new("bash");
        cmd.arg(&file)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.path().join("bin").display()))
            .env("GPUPLAN_ROOT", self.path())
            .env("GPUPLAN_CONSOLE", self.path().join("console"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("bash runs");
        let calls = std::fs::read_to_string(self.path().join("calls")).unwrap_or_default();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), calls)
    }
}

const UBUNTU: &str =
    "NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"22.04\"\nPRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\n";
const ALINUX: &str = "NAME=\"Alibaba Cloud Linux\"\nID=\"alinux\"\nID_LIKE=\"rhel fedora centos anolis\"\nVERSION_ID=\"3\"\nPRETTY_NAME=\"Alibaba Cloud Linux 3.2104 U10 (OpenAnolis Edition)\"\n";
const TENCENTOS: &str = "NAME=\"TencentOS Server\"\nID=\"tencentos\"\nID_LIKE=\"rhel fedora centos\"\nVERSION_ID=\"3.1\"\nPRETTY_NAME=\"TencentOS Server 3.1 (Final)\"\n";
const ARCH: &str = "NAME=\"Arch Linux\"\nID=arch\nPRETTY_NAME=\"Arch Linux\"\n";

#[test]
fn ubuntu_gets_the_driver_and_the_toolkit_from_apt() {
    let root = Root::new(Some(UBUNTU), &[]);
    let (code, out, calls) = root.run(&[]);
    assert_eq!(code, 0, "{out}\n{calls}");
    assert!(out.ends_with("gpuplan-ready\n"), "{out}");
    let want = [
        "apt-get update",
        "apt-get install -y ubuntu-drivers-common",
        "ubuntu-drivers install --gpgpu",
        "apt-get install -y nvidia-container-toolkit",
        "nvidia-ctk runtime configure --runtime=docker",
        "systemctl restart docker",
    ];
    for w in want {
        assert!(calls.lines().any(|l| l == w), "missing `{w}` in:\n{calls}");
    }
    assert!(!calls.contains("dnf") && !calls.contains("yum"), "{calls}");
}

#[test]
fn alibaba_cloud_linux_and_centos_like_systems_use_dnf() {
    let root = Root::new(Some(ALINUX), &[]);
    let (code, out, calls) = root.run(&[]);
    assert_eq!(code, 0, "{out}\n{calls}");
    assert!(calls.lines().any(|l| l == "dnf install -y nvidia-driver nvidia-driver-cuda"), "{calls}");
    assert!(calls.lines().any(|l| l == "dnf install -y nvidia-container-toolkit"), "{calls}");
    assert!(!calls.contains("apt-get") && !calls.contains("yum"), "{calls}");
}

#[test]
fn tencentos_falls_back_to_yum_without_dnf() {
    let root = Root::new(Some(TENCENTOS), &["dnf"]);
    let (code, out, calls) = root.run(&[]);
    assert_eq!(code, 0, "{out}\n{calls}");
    assert!(calls.lines().any(|l| l == "yum install -y nvidia-driver nvidia-driver-cuda"), "{calls}");
    assert!(calls.lines().any(|l| l == "yum install -y nvidia-container-toolkit"), "{calls}");
}

#[test]
fn an_image_that_has_everything_installs_nothing() {
    let root = Root::new(Some(UBUNTU), &[]);
    root.touch("driver");
    root.touch("toolkit");
    let (code, out, calls) = root.run(&[]);
    assert_eq!(code, 0, "{out}");
    let installs = ["apt-get", "dnf", "yum", "ubuntu-drivers", "nvidia-ctk"];
    assert!(!calls.lines().any(|l| installs.iter().any(|i| l.starts_with(i))), "{calls}");
}

/// The job's output (and the console the clouds read) says why, and the exit code is the
/// one every provider turns into a failed run with that reason.
fn failed(out: &str, root: &Root) -> String {
    let console = std::fs::read_to_string(root.path().join("console")).unwrap_or_default();
    let why = job_error(out).expect("an error line in the output");
    assert_eq!(job_error(&console).as_deref(), Some(why.as_str()), "the console says it too");
    assert_eq!(exit_code(out), Some(NOT_RUNNABLE), "{out}");
    assert!(!out.contains("gpuplan-ready"), "{out}");
    assert_eq!(exit_message(NOT_RUNNABLE, out, "console output"), format!("the node could not run the job: {why}"));
    why
}

#[test]
fn an_unknown_os_fails_clearly() {
    let root = Root::new(Some(ARCH), &[]);
    let (code, out, _) = root.run(&[]);
    assert_eq!(code, NOT_RUNNABLE, "{out}");
    let why = failed(&out, &root);
    assert_eq!(
        why,
        "driver install failed: gpuplan installs it on Ubuntu, Alibaba Cloud Linux, CentOS-like systems and TencentOS, not on Arch Linux"
    );
    // No os-release at all: the same, for an unknown OS.
    let root = Root::new(None, &[]);
    let (code, out, _) = root.run(&[]);
    assert_eq!(code, NOT_RUNNABLE);
    assert!(failed(&out, &root).ends_with("not on an unknown OS"), "{out}");
}

#[test]
fn a_failing_package_install_names_the_step() {
    let root = Root::new(Some(UBUNTU), &[]);
    let (code, out, _) = root.run(&[("FAIL_INSTALL", "1")]);
    assert_eq!(code, NOT_RUNNABLE, "{out}");
    assert_eq!(failed(&out, &root), "driver install failed: `apt-get install -y ubuntu-drivers-common` exited 100");
    let root = Root::new(Some(ALINUX), &["dnf", "yum"]);
    let (_, out, _) = root.run(&[]);
    assert_eq!(
        failed(&out, &root),
        "driver install failed: no dnf or yum on Alibaba Cloud Linux 3.2104 U10 (OpenAnolis Edition)"
    );
    // The packages install, but the driver does not work (a kernel it was not built for).
    let root = Root::new(Some(TENCENTOS), &[]);
    let (_, out, _) = root.run(&[("NO_MODULE", "1")]);
    assert!(
        failed(&out, &root).starts_with("driver install failed: nvidia-smi still fails after installing nvidia-driver"),
        "{out}"
    );
    // The driver is there, the toolkit will not install.
    let root = Root::new(Some(UBUNTU), &[]);
    root.touch("driver");
    let (_, out, _) = root.run(&[("FAIL_INSTALL", "1")]);
    assert_eq!(
        failed(&out, &root),
        "driver install failed: container toolkit: `apt-get install -y nvidia-container-toolkit` exited 100"
    );
}

/// `shellcheck` from the project's `.venv/` (`scripts/moto install` puts it there), else
/// `GPUPLAN_TEST_SHELLCHECK`.
fn shellcheck() -> PathBuf {
    if let Some(p) = std::env::var_os("GPUPLAN_TEST_SHELLCHECK") {
        return PathBuf::from(p);
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/shellcheck");
    assert!(
        local.exists(),
        "no shellcheck at {}: run the tests with `scripts/test`, which installs it",
        local.display()
    );
    local
}

#[test]
fn generated_job_scripts_pass_shellcheck() {
    let dir = tempfile::tempdir().unwrap();
    let base = super::tests::req();
    let dcgm = LaunchJob { readiness: crate::model::health::Readiness::Dcgm, ..base.clone() };
    let refs = ["aws-sm:ml/creds#token", "ssm:/ml/wandb", "env:CI_TOKEN"];
    let secrets = ["HF_TOKEN", "WANDB", "CI_TOKEN"]
        .iter()
        .zip(refs)
        .map(|(k, r)| (k.to_string(), crate::model::secret::SecretRef::parse(r).expect("a reference")))
        .collect();
    let with_secrets = LaunchJob { keep_node: true, secrets, region: "eu-west-1".into(), ..base.clone() };
    for (name, req) in [
        ("vm.sh", base.clone()),
        ("dcgm.sh", dcgm),
        ("warm.sh", LaunchJob { keep_node: true, max_runtime_secs: None, ..base }),
        ("secrets.sh", with_secrets),
    ] {
        let path = dir.path().join(name);
        // `env:` secrets read gpuplan's environment at send time: a value that needs quoting.
        let script = job_script_with(&req, &|_: &str| Some("it's $x".into())).expect("a script");
        std::fs::write(&path, script).unwrap();
        let out = Command::new(shellcheck()).arg("--shell=bash").arg(&path).output().expect("shellcheck runs");
        assert!(
            out.status.success(),
            "{name}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
