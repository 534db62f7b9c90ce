//! Orchestration of the I/O phases around the pure planner: open the state under its
//! lock, build the providers, [`gather`] what the clouds say, [`compose`] the plan, apply
//! and compact. Every command, `reconcile` and `gpuplan test` plan through those two
//! calls (docs/design/pipeline.md); commands in `cli/` are thin wrappers over these
//! functions; tests and benchmarks call them directly.

pub mod compose;
pub mod error;
pub mod gather;
pub mod health;
pub mod intent;
pub mod keys;
pub mod planfile;
pub mod preread;
pub mod providers;
pub mod refresh;
pub mod reserved;
pub mod run;
pub mod secrets;
pub mod spend;
pub mod workspaces;

pub use compose::compose;
pub use gather::{Observation, gather};
pub use intent::{Hints, PlanRequest};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use crate::providers::aws::credentials::{AwsCredentials, ChainSettings, S3Credentials};
use crate::spec::backend::BackendConfig;
use crate::state::lock::LockTiming;
use crate::state::{Backend, HistoryEntry, LocalBackend, RemoteBackend, State, StateError, StateLock};

/// Where a workspace keeps its files and how it talks to them.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The spec directory.
    pub dir: PathBuf,
    /// `state/<workspace>.json`.
    pub state_path: PathBuf,
    pub env: BTreeMap<String, String>,
    pub lock_timeout: Duration,
    /// The workspace's name (`default`, or `GPUPLAN_WORKSPACE` / `--workspace`).
    pub workspace: String,
    /// The spec's `gpuplan { backend ... }`; `None` (or `local`) keeps `state_path`.
    pub backend: Option<BackendConfig>,
    /// The spec's `gpuplan { encryption ... }`: the state and journal are sealed with it.
    pub encryption: Option<crate::model::encryption::EncryptionConfig>,
    /// A read-only command (`plan`, `cost`, `drift`, ...): it creates no state, state
    /// folder or simulated cloud; what does not exist yet reads as empty.
    pub read_only: bool,
}

impl Workspace {
    /// The embedded sim cloud lives beside the state: `state/<workspace>.sim.json`.
    pub fn sim_path(&self) -> PathBuf {
        let stem = self.state_path.file_stem().and_then(|s| s.to_str()).unwrap_or("default");
        self.state_path.with_file_name(format!("{stem}.sim.json"))
    }
    /// Where a remote state that could not be written is kept (`errored.json` beside the
    /// specs), with the command that pushes it back from where the user stands.
    fn errored_copy(&self) -> crate::state::remote::ErroredCopy {
        let mut command = "gpuplan".to_string();
        let shown = crate::spec::display_path(&self.dir);
        if shown != "." {
            command.push_str(&format!(" -C {}", shell_word(&shown)));
        }
        if self.workspace != "default" {
            command.push_str(&format!(" --workspace {}", shell_word(&self.workspace)));
        }
        command.push_str(" state push");
        crate::state::remote::ErroredCopy { dir: self.dir.clone(), push_command: command }
    }

    /// The same workspace, opened by a command that writes nothing ([`Self::read_only`]).
    pub fn reading(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// The spec's backend for this workspace (call after loading the spec).
    pub fn with_backend(mut self, spec: &crate::spec::Spec) -> Self {
        self.backend = spec.backend.clone();
        self.encryption = spec.encryption.clone();
        self
    }

    /// Where the state lives: the local file, or the remote object for this workspace.
    pub fn backend(&self) -> Result<Backend, StateError> {
        self.backend_and_credentials().map(|(b, _)| b)
    }

    /// The keys the state is read and written with (`state::seal`).
    pub fn keys(&self) -> crate::state::seal::Keyring {
        keys::keyring(self.encryption.as_ref())
    }

    /// [`Workspace::backend`], and for an s3 store the AWS credential chain it signs with
    /// (`gpuplan check` asks it which source answered).
    pub fn backend_and_credentials(&self) -> Result<(Backend, Option<Arc<AwsCredentials>>), StateError> {
        match &self.backend {
            Some(cfg) if !cfg.is_local() => {
                let chain = (cfg.kind == "s3").then(|| {
                    AwsCredentials::new(ChainSettings {
                        profile: cfg.get("profile").map(str::to_string),
                        region: cfg.get("region").map(str::to_string),
                        keys: None,
                    })
                });
                let provider = chain.clone().map(|c| {
                    let p: object_store::aws::AwsCredentialProvider = Arc::new(S3Credentials(c));
                    p
                });
                let remote = RemoteBackend::new(cfg, &self.workspace, provider)?;
                let timing = LockTiming::from_env(&self.env).map_err(|message| StateError::Remote {
                    action: "lock",
                    url: remote.url().to_string(),
                    message,
                    hint: "unset GPUPLAN_LOCK_TTL and GPUPLAN_LOCK_RENEW (test settings) for 60 s and 20 s".into(),
                })?;
                let remote =
                    remote.with_lock_timing(timing).with_errored_copy(self.errored_copy()).with_keys(self.keys());
                Ok((Backend::Remote(remote), chain))
            }
            Some(cfg) => Ok((
                Backend::Local(
                    LocalBackend::new(match cfg.get("path") {
                        Some(p) => {
                            let p = self.dir.join(p);
                            if self.workspace == "default" {
                                p
                            } else {
                                p.with_file_name(format!("{}.json", self.workspace))
                            }
                        }
                        None => self.state_path.clone(),
                    })
                    .with_keys(self.keys()),
                ),
                None,
            )),
            None => Ok((Backend::Local(LocalBackend::new(&self.state_path).with_keys(self.keys())), None)),
        }
    }
}

/// `word` as one shell word (quoted when it holds anything but safe characters).
fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:@+=".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The state opened by a command: its backend, the held lock and the current state.
pub struct Session {
    pub backend: Backend,
    pub lock: StateLock,
    pub state: State,
}

impl Session {
    /// There is no state yet: `state` is a new one in memory (serial 0), written by the
    /// first command that changes something.
    pub fn is_new(&self) -> bool {
        self.state.serial == 0
    }
}

/// Lock the state and fold in any journal a crashed apply left. Without a state yet, the
/// session holds a new one (a new lineage, serial 0) in memory: nothing is written until
/// something changes, so a command that changes nothing leaves no state behind.
///
/// A workspace opened [`read_only`](Workspace::read_only) creates nothing: without a state
/// it takes no lock either (not even the state folder is made), and it never writes.
pub fn open_session(ws: &Workspace, operation: &str) -> Result<Session, StateError> {
    open_session_preread(ws, operation, None)
}

/// [`open_session`], with the local state file possibly read ahead ([`preread`]).
pub fn open_session_preread(
    ws: &Workspace,
    operation: &str,
    pre: Option<crate::state::local::Preread>,
) -> Result<Session, StateError> {
    let backend = ws.backend()?;
    if let Backend::Local(local) = &backend {
        if ws.read_only && !local.exists() {
            let lock = StateLock::nothing(local.lock_path());
            return Ok(Session { backend, lock, state: new_state() });
        }
        if let Some(parent) = local.path().parent() {
            std::fs::create_dir_all(parent).map_err(StateError::io("create the state folder", parent))?;
        }
    }
    let lock = backend.lock(operation, ws.lock_timeout)?;
    let recovered = match (&backend, pre) {
        (Backend::Local(local), Some(pre)) => local.recover_preread(&lock, Some(pre))?,
        _ => backend.recover(&lock)?,
    };
    let state = recovered.unwrap_or_else(new_state);
    Ok(Session { backend, lock, state })
}

/// A state not written yet: a new lineage, serial 0, its creation in the history.
fn new_state() -> State {
    let mut s = State::new(uuid::Uuid::new_v4().to_string());
    s.history.push(history("init", "state created"));
    s
}

/// A history entry stamped now.
pub fn history(event: &str, detail: impl Into<String>) -> HistoryEntry {
    HistoryEntry {
        at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        event: event.to_string(),
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests;
