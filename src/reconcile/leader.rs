//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several `gpuplan
//! reconcile --leader-elect` replicas only one plans and applies (docs/design/reconcile.md).
//!
//! The loop is client-go's (`tools/leaderelection`), written on kube-rs's `Api<Lease>`:
//! every retry period, read the Lease; create it when missing; take it when it has no
//! holder or its record has not changed for `leaseDurationSeconds` *as this process
//! observed it* (the local monotonic clock, never the holder's `renewTime` against our
//! wall clock, so clock skew between replicas does not matter); renew it when it is ours.
//! Every write is a PUT of the object read, carrying its `resourceVersion`: of two
//! replicas writing at once the API server takes one and answers the other 409 Conflict.
//!
//! Why not the `kube-lease-manager` crate: it takes the lease by server-side apply and
//! judges expiry by comparing `renewTime` with the local wall clock (skew must stay
//! below its grace period), and it is one more dependency for about the size of this file.
//!
//! A leader that has not renewed for the renew deadline (2/3 of the lease duration)
//! stops being leader at once ([`Election::leading`] turns false on its own clock, even
//! if this task is stuck), before any other replica may take over (after the full
//! duration). Each term of leadership is a [`Fence`] ([`Election::fence`]): a pass acts
//! under it as under the state lock, so no mutating call starts once it lapses or is lost.
//! On shutdown the lease is released (holder cleared) so a successor takes it at its next
//! try instead of waiting for expiry.
//!
//! Durations are whole seconds, as the Lease stores them (`leaseDurationSeconds`): a
//! duration with a fraction is rounded up once ([`LeaseConfig::new`]), so the value
//! written and the deadlines this replica keeps agree.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::state::Fence;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;

/// Which lease, as whom, for how long (whole seconds: build it with [`LeaseConfig::new`]).
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub name: String,
    /// `None`: the namespace of the kubeconfig's context, or the pod's own in a cluster.
    pub namespace: Option<String>,
    pub identity: String,
    duration: Duration,
}

impl LeaseConfig {
    /// `duration` rounded up to whole seconds (at least one), the Lease's own unit: the
    /// deadlines below and the `leaseDurationSeconds` written all derive from that one value.
    pub fn new(name: String, namespace: Option<String>, identity: String, duration: Duration) -> LeaseConfig {
        let secs = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
        LeaseConfig { name, namespace, identity, duration: Duration::from_secs(secs.max(1)) }
    }

    /// How long the lease holds without renewal, in whole seconds.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// A leader that could not renew for this long steps down (client-go: 10 s of 15 s).
    pub fn renew_deadline(&self) -> Duration {
        self.duration.mul_f64(2.0 / 3.0)
    }

    /// How often every replica tries (client-go: 2 s of 15 s); also the longest a
    /// successor waits after a release.
    pub fn retry(&self) -> Duration {
        (self.duration / 8).max(Duration::from_millis(50))
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// What this replica is, as the election last decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// No answer from the API server yet.
    Starting,
    /// Another replica holds the lease (its identity, when the lease names one).
    Follower {
        leader: Option<String>,
    },
    Leader,
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum LeaseError {
    #[error("cannot set up the Kubernetes client for leader election: {message}")]
    #[diagnostic(
        code(gpuplan::lease::client),
        help(
            "in a cluster, run with a service account allowed to get, create and update `leases`; elsewhere set KUBECONFIG"
        )
    )]
    Client { message: String },
}

/// The running election: its role, and whether this replica may act now.
#[derive(Clone)]
pub struct Election {
    role: watch::Receiver<Role>,
    /// This term of leadership; `None` while not leading.
    term: Term,
    shutdown: Arc<watch::Sender<bool>>,
    /// `namespace/name`, for messages.
    pub lease: String,
}

/// The current term's fence, shared by the election task and its handles.
type Term = Arc<Mutex<Option<Fence>>>;

fn current(term: &Term) -> Option<Fence> {
    term.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

impl Election {
    /// Leader now: holding the lease and renewed within the renew deadline, judged on our
    /// own clock at the moment of asking (a process that was stopped, or whose renewals
    /// hang, is not leader however the last answer went).
    pub fn leading(&self) -> bool {
        current(&self.term).is_some_and(|f| f.is_held())
    }

    /// The fence of this term of leadership: a pass acts under it, and it stops holding
    /// for good once the renew deadline passes without a renewal or another replica
    /// takes the lease. Not leading: a fence that already does not hold.
    pub fn fence(&self) -> Fence {
        current(&self.term).unwrap_or_else(|| {
            let f = Fence::new(format!("lease `{}`", self.lease), Duration::ZERO);
            f.lose(None);
            f
        })
    }

    /// The role, to watch for changes.
    pub fn role(&self) -> watch::Receiver<Role> {
        self.role.clone()
    }

    /// Stop trying and release the lease if we hold it. Call once the work the lease
    /// guards has stopped.
    pub fn shutdown(&self) {
        // The election task may already have ended; nothing to tell it then.
        let _ = self.shutdown.send(true);
    }
}

/// Connect to the API server and start the election task. The returned handle ends
/// after [`Election::shutdown`], once the lease is released.
pub async fn start(cfg: LeaseConfig) -> Result<(Election, tokio::task::JoinHandle<()>), LeaseError> {
    crate::model::tls::install_ring();
    let fail = |e: &dyn std::fmt::Display| LeaseError::Client { message: e.to_string() };
    let mut config = kube::Config::infer().await.map_err(|e| fail(&e))?;
    // A call slower than a retry period is as good as failed: the next try is due.
    config.connect_timeout = Some(cfg.retry().max(Duration::from_secs(1)));
    config.read_timeout = Some(cfg.renew_deadline() / 2);
    // Our own loop retries on its schedule; a client retry would only blur the deadlines.
    config.default_retry = false;
    let namespace = cfg.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
    let client = kube::Client::try_from(config).map_err(|e| fail(&e))?;
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let (role_tx, role) = watch::channel(Role::Starting);
    let (shutdown_tx, shutdown) = watch::channel(false);
    let term: Term = Arc::new(Mutex::new(None));
    let lease = format!("{namespace}/{}", cfg.name);
    let election = Election { role, term: term.clone(), shutdown: Arc::new(shutdown_tx), lease: lease.clone() };
    let elector = Elector { api, cfg, observed: None, term, lease };
    let task = tokio::spawn(elector.run(role_tx, shutdown));
    Ok((election, task))
}

/// One try's result.
enum Try {
    Leading,
    Held { by: Option<String> },
    Failed,
}

struct Elector {
    api: Api<Lease>,
    cfg: LeaseConfig,
    /// The lease's last `resourceVersion` and when this process first saw it.
    observed: Option<(String, Instant)>,
    term: Term,
    /// `namespace/name`, for messages.
    lease: String,
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl Elector {
    async fn run(mut self, role: watch::Sender<Role>, mut shutdown: watch::Receiver<bool>) {
        while !*shutdown.borrow() {
            let started = Instant::now();
            let next = match tokio::time::timeout(self.cfg.renew_deadline(), self.try_acquire_or_renew()).await {
                Ok(Try::Leading) => {
                    self.renewed(started);
                    Role::Leader
                }
                Ok(Try::Held { by }) => {
                    self.end_term(by.as_deref());
                    Role::Follower { leader: by }
                }
                // No answer: a leader stays leader until its renew deadline passes (the
                // next try may succeed); anyone else stays what it was.
                Ok(Try::Failed) | Err(_) => {
                    if self.leading() {
                        Role::Leader
                    } else {
                        self.end_term(None);
                        match role.borrow().clone() {
                            Role::Leader => Role::Follower { leader: None },
                            other => other,
                        }
                    }
                }
            };
            role.send_if_modified(|r| {
                let changed = *r != next;
                *r = next;
                changed
            });
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.retry()) => {}
                _ = shutdown.changed() => {}
            }
        }
        self.release().await;
        self.end_term(None);
        role.send_replace(Role::Follower { leader: None });
    }

    fn leading(&self) -> bool {
        current(&self.term).is_some_and(|f| f.is_held())
    }

    /// A write of the lease sent at `at` went through: this term goes on, or a new one
    /// begins (a lapsed term's fence never holds again).
    fn renewed(&self, at: Instant) {
        let mut term = self.term.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match term.as_ref().filter(|f| f.is_held()) {
            Some(f) => f.renewed_at(at),
            None => {
                if let Some(old) = term.take() {
                    old.lose(None);
                }
                let what = format!("lease `{}`", self.lease);
                *term = Some(Fence::since(what, self.cfg.renew_deadline(), at));
            }
        }
    }

    /// Not leading (any more): the term's fence is lost, naming the new leader if known.
    fn end_term(&self, leader: Option<&str>) {
        if let Some(old) = self.term.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            old.lose(leader.map(|l| format!("replica `{l}` holds it now")));
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Try {
        let name = self.cfg.name.clone();
        let current = match self.api.get_opt(&name).await {
            Ok(l) => l,
            Err(_) => return Try::Failed,
        };
        let Some(mut lease) = current else { return self.create().await };
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        if self.observed.as_ref().is_none_or(|(v, _)| *v != version) {
            self.observed = Some((version, Instant::now()));
        }
        let unchanged_for = self.observed.as_ref().map_or(Duration::ZERO, |(_, at)| at.elapsed());
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(self.cfg.identity.as_str());
        let held_for = Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0));
        if let Some(h) = &holder
            && !ours
            && unchanged_for < held_for
        {
            return Try::Held { by: Some(h.clone()) };
        }
        let stamp = now();
        if !ours {
            spec.acquire_time = Some(stamp.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        spec.holder_identity = Some(self.cfg.identity.clone());
        spec.renew_time = Some(stamp);
        spec.lease_duration_seconds = Some(self.cfg.duration_seconds());
        match self.api.replace(&name, &PostParams::default(), &lease).await {
            Ok(written) => {
                self.observe(&written);
                Try::Leading
            }
            // Someone wrote first (renewed, or took it): theirs until we see it unchanged.
            Err(e) if conflict(&e) => Try::Held { by: holder.filter(|_| !ours) },
            Err(_) => Try::Failed,
        }
    }

    async fn create(&mut self) -> Try {
        let stamp = now();
        let lease = Lease {
            metadata: ObjectMeta { name: Some(self.cfg.name.clone()), ..ObjectMeta::default() },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.cfg.identity.clone()),
                lease_duration_seconds: Some(self.cfg.duration_seconds()),
                acquire_time: Some(stamp.clone()),
                renew_time: Some(stamp),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(written) => {
                self.observe(&written);
                Try::Leading
            }
            // Another replica created it first.
            Err(e) if conflict(&e) => Try::Held { by: None },
            Err(_) => Try::Failed,
        }
    }

    fn observe(&mut self, lease: &Lease) {
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        self.observed = Some((version, Instant::now()));
    }

    /// Clear the holder (client-go's `ReleaseOnCancel`: no holder, a 1 s duration), if the
    /// lease is still ours. A failure leaves the lease to expire.
    async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.cfg.name).await else { return };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        // A conflict means someone else wrote it since: then it is not ours to clear.
        let _ = self.api.replace(&self.cfg.name, &PostParams::default(), &lease).await;
    }
}

/// `--lease-identity`, else `$POD_NAME`, else `<hostname>-<pid>`.
pub fn identity(flag: Option<&str>, env: &std::collections::BTreeMap<String, String>) -> String {
    if let Some(id) = flag.filter(|s| !s.trim().is_empty()) {
        return id.trim().to_string();
    }
    if let Some(pod) = env.get("POD_NAME").map(|s| s.trim()).filter(|s| !s.is_empty()) {
        return pod.to_string();
    }
    format!("{}-{}", crate::state::lock::host(), std::process::id())
}
