//! What the VM clouds' run-command agents (Systems Manager, TAT, Cloud Assistant) run to
//! read a node's GPU health for [`super::health::HealthPort::read_health`], and what
//! their answer becomes (`docs/design/gpu-health.md`, "Sources"). One shell command
//! prints, between `health::parse`'s markers: `nvidia-smi -q -x` cut to the elements
//! gpuplan reads (the agents keep 24,000 characters of output, and eight GPUs' full XML is
//! about 160 KB), `dcgmi health -c -j` where DCGM answers with its JSON, and the last
//! [`KERNEL_LINES`] `NVRM:` XID lines of this boot's kernel log. Each cloud sends it and
//! polls its answer with [`boot::Check`]s, as the boot check does.

use std::future::Future;
use std::time::Duration;

use super::boot;
use crate::health::parse::{self, MARK_DCGM, MARK_END, MARK_KERNEL, MARK_NVIDIA_SMI};
use crate::model::ProviderError;
use crate::model::health::NodeHealth;

/// The kernel's XID lines kept (the newest): enough for every GPU of a node, small
/// enough for the agents' output limit.
pub const KERNEL_LINES: usize = 40;

/// Seconds a health read may run on the node (nvidia-smi on eight GPUs takes a few).
pub const TIMEOUT_SECS: u64 = 60;

/// Reads of a health command's answer before the node counts as unread.
const POLLS: usize = 40;
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// The elements of `nvidia-smi -q -x` that `health::parse::nvidia_smi` reads, and the
/// ones that hold them (nvidia-smi writes one element a line).
const XML_ELEMENTS: &str = "nvidia_smi_log|attached_gpus|gpu|pci|pci_bus_id|uuid|minor_number|ecc_errors|volatile|aggregate|sram_uncorrectable|sram_uncorrectable_parity|sram_uncorrectable_secded|dram_uncorrectable|double_bit|total|remapped_rows|remapped_row_pending|remapped_row_failure|retired_pages|double_bit_retirement|retired_count|pending_retirement";

/// The shell command that prints a node's capture.
pub fn capture_script() -> String {
    format!(
        r#"echo '{MARK_NVIDIA_SMI}'
if command -v nvidia-smi >/dev/null 2>&1; then
  smi="$(nvidia-smi -q -x 2>&1)"
  case "$smi" in
    *'<nvidia_smi_log'*) printf '%s\n' "$smi" | grep -E '^[[:space:]]*</?({XML_ELEMENTS})[ >]' | sed 's/^[[:space:]]*//' ;;
    *) printf '%s\n' "$smi" | grep -v '^[[:space:]]*$' | head -n 3 ;;
  esac
fi
echo '{MARK_DCGM}'
if command -v dcgmi >/dev/null 2>&1; then
  dcgm="$(dcgmi health -c -j 2>/dev/null)"
  case "$dcgm" in '{{'*) printf '%s\n' "$dcgm" ;; esac
fi
echo '{MARK_KERNEL}'
{{ journalctl -k -q --no-pager 2>/dev/null || dmesg 2>/dev/null; }} | grep -E 'NVRM: (Xid|.*fallen off the bus)' | tail -n {KERNEL_LINES} | cut -c1-300
echo '{MARK_END}'
"#
    )
}

/// Node `id`'s health from its agent's `output`, read at `seen_ms`. A capture that does
/// not parse (cut short, garbled) is no reading: `None`, so the node is left out this
/// time, never reported healthy.
pub fn node_health(id: &str, output: &str, seen_ms: u64) -> Option<NodeHealth> {
    let mut health = parse::capture(output, seen_ms).ok()?;
    health.node_id = id.to_string();
    Some(health)
}

/// A health command's output, from its state as `read` reports it, read until it ends or
/// [`POLLS`] times. `Ok(None)`: no answer (the node is left out).
pub async fn wait_output<F, Fut>(mut read: F) -> Result<Option<String>, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<boot::Check, ProviderError>>,
{
    for _ in 0..POLLS {
        match read().await? {
            boot::Check::Output(out) => return Ok(Some(out)),
            boot::Check::Ended => return Ok(None),
            boot::Check::Pending => tokio::time::sleep(POLL_INTERVAL).await,
        }
    }
    Ok(None)
}

/// The nodes' reads, awaited together (their commands run at once on the nodes): the
/// health of each that answered. A failed call fails the read.
pub async fn gather<Fut>(reads: impl IntoIterator<Item = Fut>) -> Result<Vec<NodeHealth>, ProviderError>
where
    Fut: Future<Output = Result<Option<NodeHealth>, ProviderError>>,
{
    let mut out = Vec::new();
    for read in futures::future::join_all(reads).await {
        out.extend(read?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::model::health::Signal;

    /// Runs the capture script with a stub `nvidia-smi` printing `xml` and a stub
    /// `journalctl` printing `kernel`; no `dcgmi`.
    fn run(xml: &str, kernel: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [("nvidia-smi", xml), ("journalctl", kernel)] {
            std::fs::write(dir.path().join(format!("{name}.out")), text).unwrap();
            let path = dir.path().join(name);
            std::fs::write(&path, format!("#!/bin/bash\ncat '{}'\n", dir.path().join(format!("{name}.out")).display()))
                .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let out = Command::new("bash")
            .arg("-c")
            .arg(capture_script())
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", dir.path().display()))
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn the_cut_xml_reads_as_the_whole_and_is_small() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/health/");
        let kernel = std::fs::read_to_string(format!("{root}kernel/dmesg-xid-119.log")).unwrap();
        for name in
            ["a10g.xml", "a10g-row-remap-failure.xml", "a100-sxm4-v12.xml", "rtx-3080-v13.xml", "tesla-p100-dbe.xml"]
        {
            let xml = std::fs::read_to_string(format!("{root}nvidia-smi/{name}")).unwrap();
            let out = run(&xml, &kernel);
            let whole = parse::nvidia_smi::parse(&xml).unwrap();
            let section = out.split(MARK_DCGM).next().unwrap().split(MARK_NVIDIA_SMI).nth(1).unwrap();
            let cut = parse::nvidia_smi::parse(section).unwrap_or_else(|e| panic!("{name}: {e}\n{out}"));
            assert_eq!(cut, whole, "{name}");
            assert!(section.len() < 1500, "{name}: {} characters for one GPU:\n{section}", section.len());
            let h = node_health("i-1", &out, 7).unwrap_or_else(|| panic!("{name}:\n{out}"));
            assert_eq!(h.node_id, "i-1");
            assert!(h.findings.iter().any(|f| f.xid == Some(119)), "{name}: {h:?}");
        }
    }

    #[test]
    fn a_lost_driver_is_read_and_a_cut_answer_is_no_reading() {
        let out = run("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "");
        let h = node_health("i-1", &out, 7).unwrap();
        assert_eq!(h.findings.iter().map(|f| f.signal).collect::<Vec<_>>(), vec![Signal::GpuMissing]);
        assert_eq!(node_health("i-1", &out[..out.find(MARK_END).unwrap()], 7), None);
    }
}
