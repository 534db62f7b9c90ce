//! `dcgmi health -c -j` (DCGM's background health report) into findings. The report is
//! `{"body": {"Overall Health": {"value"}, "<group>": {"children": {"<id>": {"value",
//! "children": {"Errors": {"children": {"<system>": {"value", "overflow": [...]}}}}}}}},
//! "header": ["Health Monitor Report"]}` (NVIDIA/DCGM `dcgmi/Health.cpp`): an incident per
//! entity and watched system, its health (`Warning`, `Failure`) and the messages of
//! `dcgmlib/dcgm_errors.h` cut into 54-character pieces. The JSON carries no error code,
//! so the messages are matched ([`MESSAGES`]); a `Failure` of the memory or NVLink system
//! that no message names still counts. PCIe, thermal, power and other systems are no
//! signal of gpuplan's and are left out.

use serde_json::Value;

use super::{ParseError, line_col};
use crate::health::xid;
use crate::model::health::{Finding, Signal, Source};

/// DCGM's messages (`dcgm_errors.h`, `DCGM_FR_*_MSG`) as lowercase fragments, and the
/// signal each is.
pub const MESSAGES: &[(&str, Signal)] = &[
    // DCGM_FR_VOLATILE_DBE_DETECTED, DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS
    ("double-bit ecc error", Signal::EccUncorrectable),
    ("together with a dbe", Signal::EccUncorrectable),
    // DCGM_FR_UNCORRECTABLE_ROW_REMAP
    ("had uncorrectable memory errors and", Signal::EccUncorrectable),
    // DCGM_FR_ROW_REMAP_FAILURE, DCGM_FR_UNCORRECTABLE_ROW_REMAP_LIMIT
    ("row remapping failed", Signal::RowRemapFailure),
    ("exceeded uncorrectable row remap limit", Signal::RowRemapFailure),
    // DCGM_FR_PENDING_ROW_REMAP, DCGM_FR_PENDING_PAGE_RETIREMENTS
    ("row remappings are pending", Signal::RowRemapPending),
    ("pending retired page", Signal::RowRemapPending),
    // DCGM_FR_NVLINK_DOWN, DCGM_FR_NVSWITCH_NVLINK_DOWN
    ("is currently down", Signal::NvlinkDown),
    ("nvlink down", Signal::NvlinkDown),
];

/// DCGM's XID messages: `Detected XID %u for GPU %u` (DCGM_FR_XID_ERROR), `... (XID 95)`
/// (DCGM_FR_UNCONTAINED_ERROR), and `GPU %d has fallen off the bus` (XID 79).
fn xids(message: &str) -> Vec<u32> {
    let lower = message.to_ascii_lowercase();
    let mut out: Vec<u32> = lower
        .match_indices("xid ")
        .filter_map(|(at, _)| {
            let rest = &lower[at + 4..];
            rest[..rest.bytes().take_while(u8::is_ascii_digit).count()].parse().ok()
        })
        .collect();
    if lower.contains("fallen off the bus") {
        out.push(79);
    }
    out.dedup();
    out
}

/// Parses a `dcgmi health -c -j` report.
pub fn parse(text: &str, seen_ms: u64) -> Result<Vec<Finding>, ParseError> {
    let root: Value = serde_json::from_str(text).map_err(|e| ParseError::Dcgm {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let shape = |message: &str| {
        let (line, column) = line_col(text, text.len() - text.trim_start().len());
        ParseError::Dcgm { line, column, message: message.to_string() }
    };
    if root.get("DCGM GPU Diagnostic").is_some() {
        return Err(shape("this is `dcgmi diag -j` output; gpuplan reads `dcgmi health -c -j`"));
    }
    let body = root.get("body").and_then(Value::as_object).ok_or_else(|| shape("no \"body\" object"))?;
    if body.get("Overall Health").is_none() {
        return Err(shape("no \"Overall Health\" in \"body\": not a `dcgmi health -c` report"));
    }
    let mut out = Vec::new();
    for (group, entities) in body.iter().filter(|(k, _)| *k != "Overall Health") {
        for (id, entity) in children(entities) {
            // An entity id that is not a GPU index names no GPU; its findings still count.
            let gpu = if group == "GPU" { id.parse().ok() } else { None };
            for (system, incident) in children(&entity["children"]["Errors"]) {
                out.extend(incident_findings(group, gpu, system, incident, seen_ms));
            }
        }
    }
    Ok(out)
}

fn children(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
    v.get("children").and_then(Value::as_object).into_iter().flatten()
}

/// The findings of one incident: every signal its message names, else what a `Failure` of
/// its system means.
fn incident_findings(group: &str, gpu: Option<u32>, system: &str, incident: &Value, seen_ms: u64) -> Vec<Finding> {
    let health = incident.get("value").and_then(Value::as_str).unwrap_or("");
    let message = incident
        .get("overflow")
        .and_then(Value::as_array)
        .map(|parts| parts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    let lower = message.to_ascii_lowercase();
    let finding = |signal, xid| Finding {
        signal,
        gpu,
        pci_bus: None,
        xid,
        detail: if message.is_empty() { format!("{group} {system}: {health}") } else { message.clone() },
        source: Source::Dcgm,
        seen_ms,
    };
    let mut out: Vec<Finding> = Vec::new();
    for code in xids(&message).into_iter().filter(|c| xid::marks_node(*c)) {
        out.push(finding(Signal::XidFatal, Some(code)));
    }
    for (fragment, signal) in MESSAGES {
        if lower.contains(fragment) && !out.iter().any(|f| f.signal == *signal) {
            out.push(finding(*signal, None));
        }
    }
    if out.is_empty() && health == "Failure" {
        let fallback = match system {
            "Memory system" => Some(Signal::EccUncorrectable),
            "NVLINK system" => Some(Signal::NvlinkDown),
            _ => None,
        };
        out.extend(fallback.map(|s| finding(s, None)));
    }
    out
}
