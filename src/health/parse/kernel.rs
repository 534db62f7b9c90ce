//! The kernel log's `NVRM: Xid (PCI:DDDD:BB:DD): <xid>, [pid=..., name=...,] <text>` lines
//! (any `dmesg`/`journalctl -k` prefix), and newer drivers' `NVRM: ... GPU DDDD:BB:DD.F
//! ... fallen off the bus` without an XID, read as XID 79. Only XIDs the catalog marks
//! (`health::xid`) become `xid_fatal`; 63 and 92 do only when nvidia-smi shows memory
//! trouble on that GPU. With nvidia-smi's report, the PCI bus names the GPU's index.

use std::collections::BTreeSet;

use super::nvidia_smi::{Report, normalize_bus};
use crate::health::xid;
use crate::model::health::{Finding, Signal, Source};

/// One `NVRM: Xid` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidLine {
    /// As the kernel spells it: `0000:9b:00`.
    pub pci_bus: String,
    pub xid: u32,
    /// The driver's text after the pid and process name.
    pub text: String,
}

/// XIDs that mark a node only with memory evidence (the catalog files them as IGNORE).
const NEEDS_MEMORY_EVIDENCE: [u32; 2] = [63, 92];

/// Every XID line in `text`, in order.
pub fn lines(text: &str) -> Vec<XidLine> {
    text.lines().filter_map(|l| xid_line(l).or_else(|| fallen_off(l))).collect()
}

fn xid_line(line: &str) -> Option<XidLine> {
    let rest = &line[line.find("NVRM: Xid (")? + "NVRM: Xid (".len()..];
    let (bus, rest) = rest.split_once(')')?;
    let rest = rest.strip_prefix(':')?.trim_start();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    // A line whose XID is not a number is not an `NVRM: Xid` line: it is skipped, as a
    // line of any other kind is.
    let code = rest[..digits].parse().ok()?;
    let mut text = rest[digits..].trim_start_matches([',', ' ']);
    for field in ["pid=", "name="] {
        if let Some(after) = text.strip_prefix(field) {
            text = after.split_once(", ").map_or("", |(_, t)| t);
        }
    }
    Some(XidLine { pci_bus: bus.trim_start_matches("PCI:").to_string(), xid: code, text: text.trim().to_string() })
}

fn fallen_off(line: &str) -> Option<XidLine> {
    let rest = &line[line.find("NVRM:")?..];
    if !rest.contains("fallen off the bus") {
        return None;
    }
    let bus = rest.split(|c: char| c.is_whitespace() || c == ',').find(|w| normalize_bus(w).is_some())?;
    Some(XidLine { pci_bus: bus.to_string(), xid: 79, text: "GPU has fallen off the bus".into() })
}

/// The findings of the XID lines in `text`: one per XID and GPU, marked ones only.
pub fn findings(text: &str, report: Option<&Report>, seen_ms: u64) -> Vec<Finding> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for line in lines(text) {
        let gpu = report.and_then(|r| r.gpu_on_bus(&line.pci_bus));
        let evidence = gpu.is_some_and(|g| g.memory_evidence());
        let fatal = xid::marks_node(line.xid) || (NEEDS_MEMORY_EVIDENCE.contains(&line.xid) && evidence);
        if !fatal || !seen.insert((line.xid, normalize_bus(&line.pci_bus))) {
            continue;
        }
        let meaning = xid::lookup(line.xid).map_or("unknown XID", |x| x.meaning);
        let detail = if NEEDS_MEMORY_EVIDENCE.contains(&line.xid) {
            format!("{meaning}, with memory errors on that GPU")
        } else {
            meaning.to_string()
        };
        out.push(Finding {
            signal: Signal::XidFatal,
            gpu: gpu.map(|g| g.index),
            pci_bus: Some(gpu.and_then(|g| g.pci_bus.clone()).unwrap_or(line.pci_bus)),
            xid: Some(line.xid),
            detail,
            source: Source::KernelLog,
            seen_ms,
        });
    }
    out
}
