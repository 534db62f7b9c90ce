//! What a node's run-command agent answers to gpuplan's GPU health read, built from the
//! captures in `tests/fixtures/health/` (see its README): the provider tests script the
//! fakes' and moto's answers with these.

use gpuplan::health::parse::{MARK_DCGM, MARK_END, MARK_KERNEL, MARK_NVIDIA_SMI};

/// A fixture's text (`nvidia-smi/a10g.xml`).
pub fn fixture(path: &str) -> String {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/health").join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The agent's output for a node whose tools print these fixtures (`dcgm` empty: no DCGM).
pub fn agent_output(xml: &str, dcgm: &str, kernel: &str) -> String {
    let read = |p: &str| if p.is_empty() { String::new() } else { fixture(p) };
    format!(
        "{MARK_NVIDIA_SMI}\n{}\n{MARK_DCGM}\n{}\n{MARK_KERNEL}\n{}\n{MARK_END}\n",
        read(xml),
        read(dcgm),
        read(kernel)
    )
}
