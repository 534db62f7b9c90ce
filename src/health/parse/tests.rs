use super::*;
use crate::model::health::{Signal, Source};

macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!("../../../tests/fixtures/health/", $path))
    };
}

const SEEN: u64 = 1_700_000_000_000;

fn signals(h: &NodeHealth) -> Vec<(Signal, Option<u32>, Option<u32>)> {
    h.findings.iter().map(|f| (f.signal, f.gpu, f.xid)).collect()
}

fn marked_capture(xml: &str, dcgm: &str, kernel: &str) -> String {
    format!("{MARK_NVIDIA_SMI}\n{xml}\n{MARK_DCGM}\n{dcgm}\n{MARK_KERNEL}\n{kernel}\n{MARK_END}\n")
}

#[test]
fn healthy_nvidia_smi_captures_have_no_findings() {
    for (name, xml, gpus) in [
        ("a10g v11", fixture!("nvidia-smi/a10g.xml"), 1),
        ("a100 v12 MIG", fixture!("nvidia-smi/a100-sxm4-v12.xml"), 1),
        ("rtx-3080 v13", fixture!("nvidia-smi/rtx-3080-v13.xml"), 1),
        ("tesla p100", fixture!("nvidia-smi/tesla-p100.xml"), 1),
    ] {
        let h = capture(xml, SEEN).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(h.findings, vec![], "{name}");
        assert_eq!(h.gpus_seen, Some(gpus), "{name}");
    }
}

#[test]
fn nvidia_smi_reads_index_bus_counters_and_attached() {
    let r = nvidia_smi::parse(fixture!("nvidia-smi/a100-sxm4-v12.xml")).unwrap();
    assert_eq!(r.attached, Some(4));
    let g = &r.gpus[0];
    assert_eq!((g.index, g.pci_bus.as_deref()), (1, Some("00000000:01:00.0")));
    assert_eq!(g.uuid.as_deref(), Some("GPU-513536b6-7d19-9063-b049-1e69664bb298"));
    assert_eq!((g.volatile_uncorrectable, g.remap_pending, g.remap_failure), (Some(0), false, false));
    // Pre-Ampere: the double_bit totals; three aggregate single-bit errors are no evidence.
    let p100 = nvidia_smi::parse(fixture!("nvidia-smi/tesla-p100.xml")).unwrap();
    assert_eq!((p100.gpus[0].volatile_uncorrectable, p100.gpus[0].retired_double_bit), (Some(0), Some(0)));
    assert!(!p100.gpus[0].memory_evidence());
    // v13 and ECC off: N/A is unknown, not zero.
    let v13 = nvidia_smi::parse(fixture!("nvidia-smi/rtx-3080-v13.xml")).unwrap();
    assert_eq!(v13.gpus[0].volatile_uncorrectable, None);
}

#[test]
fn row_remap_failure_and_ecc_are_findings_on_their_gpu() {
    let h = capture(fixture!("nvidia-smi/a10g-row-remap-failure.xml"), SEEN).unwrap();
    assert_eq!(signals(&h), vec![(Signal::EccUncorrectable, Some(0), None), (Signal::RowRemapFailure, Some(0), None)]);
    let f = &h.findings[0];
    assert_eq!((f.pci_bus.as_deref(), f.source, f.seen_ms), (Some("00000000:00:1E.0"), Source::NvidiaSmi, SEEN));
    assert_eq!(f.detail, "2 uncorrectable ECC errors since the last reset");
}

#[test]
fn pre_ampere_double_bit_errors_and_pending_retirement() {
    let h = capture(fixture!("nvidia-smi/tesla-p100-dbe.xml"), SEEN).unwrap();
    assert_eq!(signals(&h), vec![(Signal::EccUncorrectable, Some(0), None), (Signal::RowRemapPending, Some(0), None)]);
    assert_eq!(h.findings[1].detail, "a retired page waits for a GPU reset");
}

#[test]
fn malformed_xml_is_an_error_with_its_line() {
    let err = capture("<?xml version=\"1.0\" ?>\n<nvidia_smi_log>\n  <gpu id=\"x\">\n  </gpuu>\n", SEEN).unwrap_err();
    let ParseError::NvidiaSmi { line, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*line, 4, "{err}");
    let xml = fixture!("nvidia-smi/a10g.xml");
    let cut = &xml[..xml.find("</pci>").unwrap()];
    let err = capture(cut, SEEN).unwrap_err();
    assert!(err.to_string().contains("ends inside <nvidia_smi_log/gpu"), "{err}");
    let err = capture("<html><body>502</body></html>", SEEN).unwrap_err();
    assert!(err.to_string().contains("no <nvidia_smi_log>"), "{err}");
}

#[test]
fn dcgm_healthy_report_has_no_findings() {
    let h = capture(fixture!("dcgm/health-healthy.json"), SEEN).unwrap();
    assert_eq!(h, NodeHealth::default());
}

#[test]
fn dcgm_incidents_become_signals_per_gpu() {
    let h = capture(fixture!("dcgm/health-failure.json"), SEEN).unwrap();
    // GPU 1's PCIe warning is no signal of gpuplan's.
    assert_eq!(signals(&h), vec![(Signal::EccUncorrectable, Some(0), None), (Signal::NvlinkDown, Some(3), None)]);
    assert_eq!(h.findings[0].detail, "Detected 2 volatile double-bit ECC error(s) in GPU 0.");
    assert_eq!(h.findings[1].source, Source::Dcgm);
}

#[test]
fn dcgm_xid_messages_follow_the_catalog() {
    let report = |msg: &str| {
        format!(
            r#"{{"body":{{"Overall Health":{{"value":"Failure"}},"GPU":{{"children":{{"2":{{"value":"Failure","children":{{"Errors":{{"children":{{"Driver":{{"value":"Failure","overflow":["{msg}"]}}}}}}}}}}}}}}}},"header":["Health Monitor Report"]}}"#
        )
    };
    let h = capture(&report("GPU 2 has fallen off the bus"), SEEN).unwrap();
    assert_eq!(signals(&h), vec![(Signal::XidFatal, Some(2), Some(79))]);
    let h = capture(&report("Detected XID 13 for GPU 2"), SEEN).unwrap();
    assert_eq!(signals(&h), vec![], "an application XID marks nothing");
}

#[test]
fn malformed_dcgm_json_is_an_error_with_its_line() {
    let err = capture("{\n  \"body\": {\n    \"Overall Health\": \n}", SEEN).unwrap_err();
    let ParseError::Dcgm { line, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*line, 4, "{err}");
    let err = capture("{\"header\": []}", SEEN).unwrap_err();
    assert!(err.to_string().contains("no \"body\""), "{err}");
    let err = capture(r#"{"DCGM GPU Diagnostic": {"test_categories": []}}"#, SEEN).unwrap_err();
    assert!(err.to_string().contains("dcgmi diag"), "{err}");
}

#[test]
fn kernel_fatal_xid_lines_are_findings_once() {
    let h = capture(fixture!("kernel/dmesg-xid-119.log"), SEEN).unwrap();
    assert_eq!(signals(&h), vec![(Signal::XidFatal, None, Some(119))]);
    let f = &h.findings[0];
    assert_eq!((f.pci_bus.as_deref(), f.detail.as_str()), (Some("0000:9b:00"), "GSP RPC timeout"));
    let h = capture(fixture!("kernel/xid-79.log"), SEEN).unwrap();
    assert_eq!(signals(&h), vec![(Signal::XidFatal, None, Some(79))]);
    // Sixteen XID 13s and a 43: application faults, no finding.
    let h = capture(fixture!("kernel/dmesg-xid-13-iso.log"), SEEN).unwrap();
    assert_eq!(signals(&h), vec![]);
    assert_eq!(kernel::lines(fixture!("kernel/dmesg-xid-13-iso.log")).len(), 17);
}

#[test]
fn kernel_lines_keep_the_driver_text() {
    let l = kernel::lines(fixture!("kernel/dmesg-xid-119.log"));
    assert_eq!(l.len(), 5, "five XID 119 lines, one finding");
    assert!(l[0].text.starts_with("Timeout after 6s of waiting for RPC response from GPU4 GSP!"), "{}", l[0].text);
    let newer = "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:2330) installed in this system has\nNVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.";
    assert_eq!(kernel::lines(newer).iter().map(|l| l.xid).collect::<Vec<_>>(), vec![79]);
}

#[test]
fn marked_capture_maps_pci_bus_to_the_gpu_index() {
    let kernel = "[  100.1] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n\
                  [  100.2] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
    let text = marked_capture(fixture!("nvidia-smi/a100-sxm4-v12.xml"), "", kernel);
    let h = capture(&text, SEEN).unwrap();
    assert_eq!(signals(&h), vec![(Signal::XidFatal, Some(1), Some(79))]);
    assert_eq!(h.findings[0].pci_bus.as_deref(), Some("00000000:01:00.0"));
    assert_eq!(h.gpus_seen, Some(1));
}

#[test]
fn xid_63_marks_only_with_memory_evidence() {
    let xid63 =
        "NVRM: Xid (PCI:0000:00:1e): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.";
    let healthy = capture(&marked_capture(fixture!("nvidia-smi/a10g.xml"), "", xid63), SEEN).unwrap();
    assert_eq!(signals(&healthy), vec![]);
    let bad = capture(&marked_capture(fixture!("nvidia-smi/a10g-row-remap-failure.xml"), "", xid63), SEEN).unwrap();
    assert!(signals(&bad).contains(&(Signal::XidFatal, Some(0), Some(63))), "{:?}", signals(&bad));
    // Alone, without nvidia-smi, XID 63 is the catalog's IGNORE.
    assert_eq!(signals(&capture(fixture!("kernel/xid-63.log"), SEEN).unwrap()), vec![]);
}

#[test]
fn marked_capture_reads_all_three_and_the_lost_driver() {
    let text = marked_capture(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        fixture!("dcgm/health-failure.json"),
        fixture!("kernel/dmesg-xid-119.log"),
    );
    let h = capture(&text, SEEN).unwrap();
    let s = signals(&h);
    assert_eq!(s[0], (Signal::GpuMissing, None, None));
    assert!(h.findings[0].detail.contains("couldn't communicate"), "{}", h.findings[0].detail);
    assert!(s.contains(&(Signal::NvlinkDown, Some(3), None)) && s.contains(&(Signal::XidFatal, None, Some(119))));
    assert_eq!(h.gpus_seen, Some(0));
}

#[test]
fn a_cut_capture_or_unknown_text_is_an_error() {
    let text = marked_capture(fixture!("nvidia-smi/a10g.xml"), "", "");
    let cut = &text[..text.find(MARK_KERNEL).unwrap()];
    let err = capture(cut, SEEN).unwrap_err();
    assert!(matches!(err, ParseError::Truncated { .. }), "{err:?}");
    assert!(err.to_string().contains(MARK_DCGM), "{err}");
    assert_eq!(capture(" \n", SEEN), Err(ParseError::Empty));
    let err = capture("hello world", SEEN).unwrap_err();
    assert!(matches!(err, ParseError::Unrecognized { .. }) && err.to_string().contains("NVRM"), "{err}");
    // An empty kernel section (a clean log) and no DCGM: healthy, with the XML's count.
    let h = capture(&text, SEEN).unwrap();
    assert_eq!((h.findings.len(), h.gpus_seen), (0, Some(1)));
}

#[test]
fn scraps_are_errors_or_nothing_never_a_panic() {
    for text in ["<", "{", "<nvidia_smi_log><gpu>", "\u{feff}", MARK_END, "<nvidia_smi_log></nvidia_smi_log>x</"] {
        assert!(capture(text, SEEN).is_err(), "{text:?}");
    }
    for text in ["NVRM: Xid (", "NVRM: Xid (PCI:zz): , ", "NVRM: Xid (PCI:0000:01:00): 99999999999, x"] {
        assert_eq!(capture(text, SEEN).map(|h| h.findings.len()), Ok(0), "{text:?}");
    }
}
