//! The realistic 2,000-pool shape of issue 51 for `small_fleet`: A100-80GB pools of 8 GPUs
//! a node, two nodes each; every other pool runs a 50 % spot mix (one on-demand node, one
//! spot, falling back to on-demand), the others are on-demand and labelled critical. Each
//! pool spreads over two of the sim's six `us-east-1` zones, the first always
//! `us-east-1a`, so that zone's on-demand capacity (the sim's default, 1,000 nodes) runs
//! out and some nodes fall back to the pool's other zone. Pools form chains of ten
//! (`depends_on` the one before it), two quotas split the fleet, the starter policies are
//! in `policies/` (the fleet's hourly cap raised to fit 2,000 pools) and a few jobs queue
//! on the first pools. Written in files of 1,000 pools, as `scale/generate.rs` does.

use std::fmt::Write as _;
use std::path::Path;

const ZONES: [&str; 6] = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"];

/// Jobs queued on the first pools.
const JOBS: usize = 4;

/// Write the spec and policies into `dir`; returns the bytes of spec written.
pub fn write_spec(dir: &Path, pools: usize) -> std::io::Result<u64> {
    std::fs::create_dir_all(dir.join("policies"))?;
    for (name, text) in POLICIES {
        std::fs::write(dir.join("policies").join(name), text)?;
    }
    let main = main_hcl(pools);
    std::fs::write(dir.join("main.hcl"), &main)?;
    let mut bytes = main.len() as u64;
    for (file, start) in (0..pools).step_by(super::generate::POOLS_PER_FILE).enumerate() {
        let mut text = String::with_capacity(super::generate::POOLS_PER_FILE * 420);
        for i in start..(start + super::generate::POOLS_PER_FILE).min(pools) {
            pool(&mut text, i);
        }
        bytes += text.len() as u64;
        std::fs::write(dir.join(format!("pools-{file:04}.hcl")), text)?;
    }
    Ok(bytes)
}

fn name(i: usize) -> String {
    super::generate::pool_name(i)
}

/// The provider, two quotas over halves of the fleet, a job template and the jobs.
fn main_hcl(pools: usize) -> String {
    let mut out = String::from("provider \"sim\" {\n  region = \"us-east-1\"\n  seed   = 7\n}\n\n");
    let half = pools.div_ceil(2);
    for (q, range) in [("research", 0..half), ("production", half..pools)] {
        let list: Vec<String> = range.map(|i| format!("gpu_pool.{}", name(i))).collect();
        let _ = write!(
            out,
            "quota \"{q}\" {{\n  pools        = [{}]\n  max_gpus     = {}\n  allowed_gpus = [\"A100-80GB\"]\n}}\n\n",
            list.join(", "),
            pools * 16
        );
    }
    out.push_str(
        "job_template \"train\" {\n  image       = \"ghcr.io/example/train:2.1\"\n  command     = [\"python\", \"train.py\"]\n  gpus        = 8\n  priority    = \"medium\"\n  preemptible = true\n  max_runtime = \"12h\"\n}\n\n",
    );
    for j in 0..JOBS.min(pools) {
        let q = if j < half { "research" } else { "production" };
        let _ = write!(
            out,
            "job \"run{j}\" {{\n  template = job_template.train\n  pool     = gpu_pool.{}\n  quota    = quota.{q}\n  args     = [\"--run\", \"{j}\"]\n}}\n\n",
            name(j)
        );
    }
    out
}

fn pool(out: &mut String, i: usize) {
    let _ = writeln!(out, "gpu_pool \"{}\" {{", name(i));
    let second = ZONES[1 + i % (ZONES.len() - 1)];
    let _ = writeln!(
        out,
        "  provider      = \"sim\"\n  region        = \"us-east-1\"\n  zones         = [\"{}\", \"{second}\"]",
        ZONES[0]
    );
    out.push_str("  gpu           = \"A100-80GB\"\n  gpus_per_node = 8\n");
    out.push_str("  nodes {\n    min     = 0\n    desired = 2\n    max     = 4\n  }\n");
    if i.is_multiple_of(2) {
        out.push_str(
            "  mix {\n    on_demand_base = 0\n    spot_percent   = 50\n    fallback       = \"on_demand\"\n  }\n",
        );
        let _ = writeln!(out, "  labels = {{\n    team = \"team{}\"\n  }}", i % 8);
    } else {
        let _ = writeln!(out, "  labels = {{\n    team     = \"team{}\"\n    critical = \"true\"\n  }}", i % 8);
    }
    if !i.is_multiple_of(10) {
        let _ = writeln!(out, "  depends_on = [gpu_pool.{}]", name(i - 1));
    }
    out.push_str("}\n\n");
}

/// The starter policies `gpuplan init` writes, with the fleet's hourly cap raised from 500
/// USD/h to what 2,000 pools of two A100 nodes cost (a team edits it the same way).
const POLICIES: [(&str, &str); 5] = [
    ("fleet_hourly_cap.hcl", FLEET_CAP),
    ("min_spot_share.hcl", include_str!("../../policies/min_spot_share.hcl")),
    ("allowed_gpu_models.hcl", include_str!("../../policies/allowed_gpu_models.hcl")),
    ("max_gpu_hour_price.hcl", include_str!("../../policies/max_gpu_hour_price.hcl")),
    ("no_destroy_pool_with_jobs.hcl", include_str!("../../policies/no_destroy_pool_with_jobs.hcl")),
];

const FLEET_CAP: &str = r#"# The whole fleet must not cost more than this per hour after the change.
policy "fleet_hourly_cap" {
  enforcement = "hard"
  description = "fleet hourly cost stays under 150,000 USD/h"
  assert      = plan.cost.hourly_after <= 150000
  message     = "the fleet would cost ${format("%.2f", plan.cost.hourly_after)} USD/h after this change, above the 150,000 USD/h cap"
}
"#;
