//! Synthetic spec directories for the scale benchmark: N one-node sim pools in HCL,
//! every tenth pool `depends_on` the one before it (short chains), 1,000 pools per file.

use std::fmt::Write as _;
use std::path::Path;

/// Pools per generated file: big fleets are split over many files, as real repos are.
pub const POOLS_PER_FILE: usize = 1_000;

/// The address name of pool `i`.
pub fn pool_name(i: usize) -> String {
    format!("p{i:06}")
}

/// Whether pool `i` depends on pool `i - 1`.
pub fn chained(i: usize) -> bool {
    i % 10 == 9
}

/// Write `main.hcl` (the provider) and `pools-*.hcl` into `dir`; returns the bytes written.
/// `zone_capacity` is raised so that 100,000 one-node pools fit in one region.
pub fn write_spec(dir: &Path, pools: usize) -> std::io::Result<u64> {
    std::fs::create_dir_all(dir)?;
    let main =
        "provider \"sim\" {\n  region        = \"us-east-1\"\n  seed          = 7\n  zone_capacity = 1000000\n}\n";
    std::fs::write(dir.join("main.hcl"), main)?;
    let mut bytes = main.len() as u64;
    for (file, start) in (0..pools).step_by(POOLS_PER_FILE).enumerate() {
        let mut text = String::with_capacity(POOLS_PER_FILE * 260);
        for i in start..(start + POOLS_PER_FILE).min(pools) {
            pool(&mut text, i);
        }
        bytes += text.len() as u64;
        std::fs::write(dir.join(format!("pools-{file:04}.hcl")), text)?;
    }
    Ok(bytes)
}

fn pool(out: &mut String, i: usize) {
    let _ = writeln!(out, "gpu_pool \"{}\" {{", pool_name(i));
    out.push_str("  provider      = \"sim\"\n  region        = \"us-east-1\"\n  gpu           = \"L4\"\n");
    out.push_str("  gpus_per_node = 1\n  nodes {\n    min     = 0\n    desired = 1\n    max     = 1\n  }\n");
    if chained(i) && i > 0 {
        let _ = writeln!(out, "  depends_on = [gpu_pool.{}]", pool_name(i - 1));
    }
    out.push_str("}\n\n");
}
