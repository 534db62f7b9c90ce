//! NVIDIA's XID catalog, as data: which XIDs mark a node (their resolution is a GPU reset,
//! a reboot or a new node) and what each means to a person. Source: NVIDIA's "XID Errors"
//! catalog (docs.nvidia.com/deploy/xid-errors), see `docs/design/reference/wave4-apis.md`;
//! the resolution buckets as NVIDIA/NVSentinel's `xiderrorsmapping.csv` files them
//! (RESET_GPU, RESTART_BM, RESTART_VM and the XID 48 / NVLink workflows mark the node;
//! RESTART_APP, IGNORE and the XID 45 workflow never do). XIDs the catalog files as
//! "report the issue" are left out: they never mark a node.

/// What an XID asks of the node, from the catalog's resolution bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// A GPU reset, a reboot or a new node: the node is marked.
    Node,
    /// The application's own fault, or ignorable: never marks a node.
    Application,
}

/// One catalog entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xid {
    pub code: u32,
    pub meaning: &'static str,
    pub resolution: Resolution,
}

/// The entries gpuplan knows; an XID outside the table never marks a node.
pub const CATALOG: &[Xid] = &[
    Xid { code: 13, meaning: "graphics engine exception", resolution: Resolution::Application },
    Xid { code: 31, meaning: "GPU memory page fault", resolution: Resolution::Application },
    Xid { code: 43, meaning: "GPU stopped processing", resolution: Resolution::Application },
    Xid { code: 45, meaning: "preemptive cleanup, due to previous errors", resolution: Resolution::Application },
    Xid { code: 46, meaning: "GPU stopped responding (timeout)", resolution: Resolution::Node },
    Xid { code: 48, meaning: "double bit ECC error", resolution: Resolution::Node },
    Xid { code: 62, meaning: "internal micro-controller halt", resolution: Resolution::Node },
    Xid {
        code: 63,
        meaning: "ECC page retirement or row remapping recording event",
        resolution: Resolution::Application,
    },
    Xid { code: 64, meaning: "ECC page retirement or row remapper recording failure", resolution: Resolution::Node },
    Xid { code: 68, meaning: "video decoder exception", resolution: Resolution::Application },
    Xid { code: 74, meaning: "NVLink error", resolution: Resolution::Node },
    Xid { code: 79, meaning: "GPU has fallen off the bus", resolution: Resolution::Node },
    Xid { code: 92, meaning: "high single-bit ECC error rate", resolution: Resolution::Application },
    Xid { code: 94, meaning: "contained ECC error", resolution: Resolution::Application },
    Xid { code: 95, meaning: "uncontained ECC error", resolution: Resolution::Node },
    Xid { code: 109, meaning: "context switch timeout", resolution: Resolution::Node },
    Xid { code: 110, meaning: "security fault", resolution: Resolution::Node },
    Xid { code: 119, meaning: "GSP RPC timeout", resolution: Resolution::Node },
    Xid { code: 120, meaning: "GSP error", resolution: Resolution::Node },
    Xid { code: 136, meaning: "NVLink link training failed", resolution: Resolution::Node },
    Xid { code: 140, meaning: "unrecovered ECC error", resolution: Resolution::Node },
    Xid { code: 143, meaning: "GPU initialization failed", resolution: Resolution::Node },
    Xid { code: 144, meaning: "NVLink SAW error", resolution: Resolution::Node },
    Xid { code: 145, meaning: "NVLink RLW error", resolution: Resolution::Node },
    Xid { code: 146, meaning: "NVLink TLW error", resolution: Resolution::Node },
    Xid { code: 147, meaning: "NVLink TREX error", resolution: Resolution::Node },
    Xid { code: 148, meaning: "NVLink NVLPW control error", resolution: Resolution::Node },
    Xid { code: 149, meaning: "NVLink NETIR error", resolution: Resolution::Node },
    Xid { code: 150, meaning: "NVLink MSE error", resolution: Resolution::Node },
    Xid { code: 151, meaning: "key rotation error", resolution: Resolution::Node },
    Xid { code: 154, meaning: "GPU recovery action changed", resolution: Resolution::Application },
    Xid { code: 155, meaning: "NVLink software-defined error", resolution: Resolution::Node },
    Xid { code: 156, meaning: "resource retirement event", resolution: Resolution::Node },
    Xid { code: 158, meaning: "GPU fatal timeout", resolution: Resolution::Node },
    Xid { code: 160, meaning: "channel retirement event", resolution: Resolution::Node },
];

/// The catalog entry for `code`, if gpuplan knows it.
pub fn lookup(code: u32) -> Option<&'static Xid> {
    CATALOG.iter().find(|x| x.code == code)
}

/// Whether `code` marks a node (its resolution is a reset, a reboot or a new node).
pub fn marks_node(code: u32) -> bool {
    lookup(code).is_some_and(|x| x.resolution == Resolution::Node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fatal_and_application_xids_are_told_apart() {
        for code in
            [46, 48, 62, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143, 144, 149, 150, 151, 155, 156, 158, 160]
        {
            assert!(marks_node(code), "XID {code} marks the node");
        }
        for code in [13, 31, 43, 45, 63, 68, 92, 94, 154, 9999] {
            assert!(!marks_node(code), "XID {code} does not");
        }
        assert_eq!(lookup(79).map(|x| x.meaning), Some("GPU has fallen off the bus"));
    }
}
