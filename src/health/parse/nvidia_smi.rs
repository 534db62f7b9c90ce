//! `nvidia-smi -q -x` (DTD `nvsmi_device` v11 to v13) into a [`Report`]: each `<gpu>`'s
//! index, PCI bus and UUID, its uncorrectable ECC counters (Ampere and later:
//! `{sram,dram}_uncorrectable`, v13's `sram_uncorrectable_{parity,secded}`; before Ampere:
//! `double_bit/total`), `remapped_rows` pending and failure, and `retired_pages`. Read with
//! quick-xml's pull parser (already built for object_store), keeping only these elements;
//! `N/A` and absent values count as unknown, never as zero.

use quick_xml::Reader;
use quick_xml::events::Event;

use super::{ParseError, line_col};
use crate::model::health::{Finding, Signal, Source};

/// One GPU as nvidia-smi lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gpu {
    /// `minor_number` (the `/dev/nvidiaN` it is), else its place in the list.
    pub index: u32,
    /// `pci/pci_bus_id`, else the `<gpu id>` attribute (`00000000:3B:00.0`).
    pub pci_bus: Option<String>,
    pub uuid: Option<String>,
    /// Uncorrectable ECC errors since the last reset (`ecc_errors/volatile`).
    pub volatile_uncorrectable: Option<u64>,
    /// Uncorrectable ECC errors over the GPU's life (`ecc_errors/aggregate`): they survive
    /// resets and repaired rows, so they are evidence, never a signal alone.
    pub aggregate_uncorrectable: Option<u64>,
    pub remap_pending: bool,
    pub remap_failure: bool,
    /// Pages retired for double-bit errors (before Ampere).
    pub retired_double_bit: Option<u64>,
    /// A retired page waits for a reset (before Ampere).
    pub pending_retirement: bool,
}

impl Gpu {
    /// Whether the memory shows trouble: what turns XID 63 or 92 into a fatal one.
    pub fn memory_evidence(&self) -> bool {
        self.volatile_uncorrectable.unwrap_or(0) > 0
            || self.aggregate_uncorrectable.unwrap_or(0) > 0
            || self.retired_double_bit.unwrap_or(0) > 0
            || self.remap_pending
            || self.remap_failure
            || self.pending_retirement
    }
}

/// What one `nvidia-smi -q -x` printed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// `attached_gpus`: what the driver counts, which may exceed the `<gpu>`s listed.
    pub attached: Option<u32>,
    pub gpus: Vec<Gpu>,
    /// nvidia-smi printed an error instead of XML (the driver lost the GPUs).
    pub failure: Option<String>,
}

impl Report {
    /// The findings of this report, seen at `seen_ms`.
    pub fn findings(&self, seen_ms: u64) -> Vec<Finding> {
        let mut out = Vec::new();
        let mut push = |signal, gpu: Option<&Gpu>, detail: String| {
            out.push(Finding {
                signal,
                gpu: gpu.map(|g| g.index),
                pci_bus: gpu.and_then(|g| g.pci_bus.clone()),
                xid: None,
                detail,
                source: Source::NvidiaSmi,
                seen_ms,
            })
        };
        if let Some(message) = &self.failure {
            push(Signal::GpuMissing, None, format!("nvidia-smi could not read the GPUs: {message}"));
        }
        for gpu in &self.gpus {
            if let Some(n) = gpu.volatile_uncorrectable.filter(|n| *n > 0) {
                push(Signal::EccUncorrectable, Some(gpu), format!("{n} uncorrectable ECC errors since the last reset"));
            }
            if gpu.remap_failure {
                push(Signal::RowRemapFailure, Some(gpu), "row remapping failed: no spare rows left".into());
            }
            if gpu.remap_pending {
                push(Signal::RowRemapPending, Some(gpu), "a row remap waits for a GPU reset".into());
            }
            if gpu.pending_retirement {
                push(Signal::RowRemapPending, Some(gpu), "a retired page waits for a GPU reset".into());
            }
        }
        out
    }

    /// The GPU on PCI bus `bus` (any spelling: `0000:3b:00` or `00000000:3B:00.0`).
    pub fn gpu_on_bus(&self, bus: &str) -> Option<&Gpu> {
        let want = normalize_bus(bus)?;
        self.gpus.iter().find(|g| g.pci_bus.as_deref().and_then(normalize_bus) == Some(want))
    }
}

/// A PCI address as (domain, bus, device), whatever the zero padding, case or function.
pub fn normalize_bus(bus: &str) -> Option<(u32, u32, u32)> {
    let bus = bus.trim().trim_start_matches("PCI:");
    let bus = bus.split('.').next()?;
    // A part that is not hex makes the whole address unreadable: `None`, and the finding
    // keeps its PCI text without a GPU index rather than naming the wrong GPU.
    let mut parts = bus.split(':').map(|p| u32::from_str_radix(p, 16).ok());
    let (d, b, dev) = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some((d, b, dev))
}

/// A section of an agent's capture: XML, or the error nvidia-smi printed instead (kept as
/// evidence that the GPUs are gone, not as a parse error).
pub fn section(text: &str) -> Result<Report, ParseError> {
    if text.trim_start().starts_with('<') {
        return parse(text);
    }
    let message = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    Ok(Report { failure: Some(message.chars().take(200).collect()), ..Report::default() })
}

/// Parses `nvidia-smi -q -x` output.
pub fn parse(text: &str) -> Result<Report, ParseError> {
    let mut reader = Reader::from_str(text);
    reader.config_mut().trim_text(true);
    let mut walk = Walk::default();
    loop {
        let event = reader.read_event().map_err(|e| error(text, reader.error_position(), e.to_string()))?;
        match event {
            Event::Start(start) => {
                let name = String::from_utf8_lossy(start.local_name().as_ref()).into_owned();
                // A malformed `id` attribute is an element without one: the GPU's place and
                // `minor_number` still name it.
                let id =
                    start.try_get_attribute("id").ok().flatten().and_then(|a| {
                        a.normalized_value(quick_xml::XmlVersion::Implicit1_0).ok().map(|v| v.into_owned())
                    });
                walk.open(name, id);
            }
            Event::End(_) => walk.close(),
            Event::Text(t) => {
                let value = t.decode().map_err(|e| error(text, reader.buffer_position(), e.to_string()))?;
                walk.text(value.trim());
            }
            Event::Eof => break,
            _ => {}
        }
    }
    walk.finish().map_err(|message| error(text, text.len() as u64, message))
}

fn error(text: &str, position: u64, message: String) -> ParseError {
    let (line, column) = line_col(text, position as usize);
    ParseError::NvidiaSmi { line, column, message }
}

/// The pull parser's state: where in the tree it is and the GPU being read.
#[derive(Default)]
struct Walk {
    /// Element names from the root (`nvidia_smi_log`).
    path: Vec<String>,
    root_seen: bool,
    report: Report,
    gpu: Option<Gpu>,
    /// The `<gpu id>` attribute of the GPU being read.
    gpu_id: Option<String>,
}

impl Walk {
    fn open(&mut self, name: String, id: Option<String>) {
        if self.path.is_empty() && name == "nvidia_smi_log" {
            self.root_seen = true;
        }
        if self.path.len() == 1 && name == "gpu" {
            self.gpu = Some(Gpu { index: self.report.gpus.len() as u32, ..Gpu::default() });
            self.gpu_id = id;
        }
        self.path.push(name);
    }

    fn close(&mut self) {
        if self.path.len() == 2
            && self.path[1] == "gpu"
            && let Some(mut gpu) = self.gpu.take()
        {
            if gpu.pci_bus.is_none() {
                gpu.pci_bus = self.gpu_id.take();
            }
            self.report.gpus.push(gpu);
        }
        self.path.pop();
    }

    fn text(&mut self, value: &str) {
        if value.is_empty() || self.path.first().map(String::as_str) != Some("nvidia_smi_log") {
            return;
        }
        if self.path.len() == 2 && self.path[1] == "attached_gpus" {
            // `N/A` or text is "count unknown", never zero: `gpu_missing` needs a number.
            self.report.attached = value.parse().ok();
            return;
        }
        let Some(gpu) = self.gpu.as_mut() else { return };
        if self.path.len() < 3 {
            return;
        }
        let key = self.path[2..].join("/");
        apply(gpu, &key, value);
    }

    fn finish(self) -> Result<Report, String> {
        if !self.root_seen {
            return Err("no <nvidia_smi_log> element: not `nvidia-smi -q -x` output".into());
        }
        if !self.path.is_empty() {
            return Err(format!("the XML ends inside <{}>", self.path.join("/")));
        }
        Ok(self.report)
    }
}

/// Records one element's text on the GPU, where it is one gpuplan reads.
fn apply(gpu: &mut Gpu, key: &str, value: &str) {
    let count = || value.parse::<u64>().ok();
    let yes = value.eq_ignore_ascii_case("yes");
    let add = |slot: &mut Option<u64>| {
        if let Some(n) = count() {
            *slot = Some(slot.unwrap_or(0) + n);
        }
    };
    match key {
        "minor_number" => {
            if let Ok(n) = value.parse() {
                gpu.index = n;
            }
        }
        "pci/pci_bus_id" => gpu.pci_bus = Some(value.to_string()),
        "uuid" => gpu.uuid = Some(value.to_string()),
        "remapped_rows/remapped_row_pending" => gpu.remap_pending = yes,
        "remapped_rows/remapped_row_failure" => gpu.remap_failure = yes,
        "retired_pages/double_bit_retirement/retired_count" => gpu.retired_double_bit = count(),
        "retired_pages/pending_retirement" => gpu.pending_retirement = yes,
        _ => {
            if let Some(kind) = uncorrectable(key) {
                add(if kind == "volatile" {
                    &mut gpu.volatile_uncorrectable
                } else {
                    &mut gpu.aggregate_uncorrectable
                });
            }
        }
    }
}

/// `volatile` or `aggregate` when `key` is an uncorrectable ECC counter nvidia-smi sums
/// nowhere else (so none is counted twice).
fn uncorrectable(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("ecc_errors/")?;
    let (kind, counter) = rest.split_once('/')?;
    let counted = matches!(
        counter,
        "sram_uncorrectable"
            | "sram_uncorrectable_parity"
            | "sram_uncorrectable_secded"
            | "dram_uncorrectable"
            | "double_bit/total"
    );
    (counted && (kind == "volatile" || kind == "aggregate")).then_some(kind)
}
