//! GPU health vocabulary (`docs/design/gpu-health.md`): the faults a node's GPUs can show
//! ([`Signal`]), one piece of evidence ([`Finding`]) with where it was read ([`Source`]),
//! and what one read of a node found ([`NodeHealth`]). Plain data: the parsers live in
//! `health/`, the reads in the providers, the decisions in the plan.

use serde::{Deserialize, Serialize};

/// A fault that can mark a node unhealthy (`health { signals = [...] }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// An XID whose resolution is a GPU reset, a reboot or a new node (`health::xid`).
    XidFatal,
    /// Uncorrectable (double-bit) ECC errors, volatile or aggregate.
    EccUncorrectable,
    /// A row-remapping failure: the GPU has no spare rows left.
    RowRemapFailure,
    /// A row remap waits for a GPU reset.
    RowRemapPending,
    /// Fewer GPUs answer than the instance type promises.
    GpuMissing,
    /// An NVLink link is down or inactive.
    NvlinkDown,
    /// The node's readiness check (DCGM level 1, nvidia-smi) failed.
    ReadinessFailed,
}

impl Signal {
    /// Every signal, in the order the spec reference lists them.
    pub const ALL: [Signal; 7] = [
        Signal::XidFatal,
        Signal::EccUncorrectable,
        Signal::RowRemapFailure,
        Signal::RowRemapPending,
        Signal::GpuMissing,
        Signal::NvlinkDown,
        Signal::ReadinessFailed,
    ];

    /// The signals a pool counts when its `health {}` names none (the design's default set).
    pub const DEFAULT: [Signal; 5] =
        [Signal::XidFatal, Signal::EccUncorrectable, Signal::RowRemapFailure, Signal::GpuMissing, Signal::NvlinkDown];

    /// The spelling in specs, state and JSON views.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::XidFatal => "xid_fatal",
            Signal::EccUncorrectable => "ecc_uncorrectable",
            Signal::RowRemapFailure => "row_remap_failure",
            Signal::RowRemapPending => "row_remap_pending",
            Signal::GpuMissing => "gpu_missing",
            Signal::NvlinkDown => "nvlink_down",
            Signal::ReadinessFailed => "readiness_failed",
        }
    }

    /// The signal a spec spells `s`, if any.
    pub fn parse(s: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a finding was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `nvidia-smi -q -x` (XML).
    NvidiaSmi,
    /// `dcgmi health -c -j` or `dcgmi diag` (JSON).
    Dcgm,
    /// The kernel log's `NVRM: Xid` lines.
    KernelLog,
    /// Node conditions, labels and allocatable on Kubernetes.
    Kubernetes,
    /// The node's readiness check, by its exit code.
    Readiness,
    /// The embedded cloud's scripted faults (`gpuplan sim fault`).
    Sim,
}

/// One piece of evidence that a node's GPU is unwell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    pub signal: Signal,
    /// The GPU's index on the node, where the source names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// The GPU's PCI bus id (`00000000:3B:00.0`), where the source names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus: Option<String>,
    /// The XID, for `xid_fatal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xid: Option<u32>,
    /// What a person reads: `GPU has fallen off the bus`, `2 uncorrectable ECC errors`.
    pub detail: String,
    pub source: Source,
    /// When it was first seen, ms since the epoch (provider clock).
    pub seen_ms: u64,
}

impl Finding {
    /// Whether `other` is the same fault: the same signal, GPU, XID and source (what a
    /// later read of the node says again, whatever its words and time).
    pub fn same_fault(&self, other: &Finding) -> bool {
        (self.signal, self.gpu, &self.pci_bus, self.xid, self.source)
            == (other.signal, other.gpu, &other.pci_bus, other.xid, other.source)
    }

    /// This finding, first seen when `earlier` (the same fault recorded before) was, if
    /// that was earlier.
    pub fn first_seen_in(&self, earlier: &[Finding]) -> Finding {
        let first = earlier.iter().filter(|e| e.same_fault(self)).map(|e| e.seen_ms).min();
        Finding { seen_ms: first.map_or(self.seen_ms, |f| f.min(self.seen_ms)), ..self.clone() }
    }
}

/// What one read of one node found.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeHealth {
    /// The provider's node id.
    pub node_id: String,
    /// Every fault seen, whether or not the pool counts its signal.
    pub findings: Vec<Finding>,
    /// How many GPUs answered, where the source counts them (compared with the shape for
    /// `gpu_missing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_seen: Option<u32>,
    /// Read from a Kubernetes cluster: whether its Node is cordoned (`spec.unschedulable`),
    /// so a quarantine has nothing to call. `None`: not read from a cluster (a node not
    /// joined yet cannot be cordoned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cordoned: Option<bool>,
}

/// `health { readiness }`: the check a node passes before it takes a job. The job script
/// runs it first (`providers::userdata`); a failure exits with its own code, so the run
/// says its node failed, not the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Readiness {
    /// DCGM diagnostics, level 1 (`dcgmi diag -r 1`).
    Dcgm,
    /// `nvidia-smi` answers and lists every GPU the job needs.
    #[default]
    NvidiaSmi,
    /// No check.
    None,
}

impl Readiness {
    /// The spelling in specs: `dcgm`, `nvidia-smi`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Readiness::Dcgm => "dcgm",
            Readiness::NvidiaSmi => "nvidia-smi",
            Readiness::None => "none",
        }
    }

    /// Whether this is the default (`nvidia-smi`), which saved plans leave out.
    pub fn is_default(&self) -> bool {
        *self == Readiness::default()
    }
}
