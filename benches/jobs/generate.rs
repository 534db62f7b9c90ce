//! Synthetic spec directories for the job-queue benchmark: `POOLS` sim pools of two
//! 8-GPU L4 nodes (every fifth one mostly spot, falling back to on-demand), `QUOTAS`
//! quotas of `POOLS / QUOTAS` pools each (half with a fair-share weight, a quarter with
//! `max_gpus`), eight templates (the four priorities, preemptible and not, 1 to 4 GPUs)
//! and N jobs spread over the pools round-robin, every tenth one `depends_on` the job
//! before it (short pipelines), 5,000 jobs per file.

use std::fmt::Write as _;
use std::path::Path;

pub const POOLS: usize = 1_000;
pub const QUOTAS: usize = 20;
const JOBS_PER_FILE: usize = 5_000;
const PRIORITIES: [&str; 4] = ["critical", "high", "medium", "low"];

/// Write `main.hcl` (provider, pools, quotas, templates) and `jobs-*.hcl` into `dir`.
pub fn write_spec(dir: &Path, jobs: usize) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut main = String::from(
        "provider \"sim\" {\n  region        = \"us-east-1\"\n  seed          = 7\n  zone_capacity = 1000000\n  job_duration  = \"24h\"\n}\n\n",
    );
    for i in 0..POOLS {
        pool(&mut main, i);
    }
    for q in 0..QUOTAS {
        quota(&mut main, q);
    }
    for (t, priority) in PRIORITIES.iter().enumerate() {
        for preemptible in [false, true] {
            let gpus = 1 + (t + usize::from(preemptible)) % 4;
            let _ = writeln!(
                main,
                "job_template \"t_{priority}_{preemptible}\" {{\n  image       = \"ghcr.io/example/train:1\"\n  command     = [\"python\", \"train.py\"]\n  gpus        = {gpus}\n  priority    = \"{priority}\"\n  preemptible = {preemptible}\n  retries     = 1\n}}\n"
            );
        }
    }
    std::fs::write(dir.join("main.hcl"), main)?;
    for (file, start) in (0..jobs).step_by(JOBS_PER_FILE).enumerate() {
        let mut text = String::with_capacity(JOBS_PER_FILE * 160);
        for i in start..(start + JOBS_PER_FILE).min(jobs) {
            job(&mut text, i);
        }
        std::fs::write(dir.join(format!("jobs-{file:04}.hcl")), text)?;
    }
    Ok(())
}

fn pool_name(i: usize) -> String {
    format!("p{i:04}")
}

fn pool(out: &mut String, i: usize) {
    let _ = writeln!(out, "gpu_pool \"{}\" {{", pool_name(i));
    out.push_str("  provider      = \"sim\"\n  region        = \"us-east-1\"\n  gpu           = \"L4\"\n");
    out.push_str("  gpus_per_node = 8\n  nodes {\n    min     = 0\n    desired = 2\n    max     = 2\n  }\n");
    if i.is_multiple_of(5) {
        out.push_str(
            "  mix {\n    on_demand_base = 1\n    spot_percent   = 100\n    fallback       = \"on_demand\"\n  }\n",
        );
    }
    out.push_str("}\n\n");
}

fn quota(out: &mut String, q: usize) {
    let per = POOLS / QUOTAS;
    let pools: Vec<String> = (q * per..(q + 1) * per).map(|i| format!("gpu_pool.{}", pool_name(i))).collect();
    let _ = writeln!(out, "quota \"q{q:02}\" {{\n  pools = [{}]", pools.join(", "));
    if q.is_multiple_of(2) {
        let _ = writeln!(out, "  weight = {}", 1 + q % 3);
    }
    if q % 4 == 1 {
        let _ = writeln!(out, "  max_gpus = {}", per * 16);
    }
    out.push_str("}\n\n");
}

fn job(out: &mut String, i: usize) {
    let p = i % POOLS;
    let q = p / (POOLS / QUOTAS);
    let priority = PRIORITIES[(i / 7) % 4];
    let preemptible = i.is_multiple_of(3);
    let _ = writeln!(out, "job \"j{i:06}\" {{");
    let _ = writeln!(out, "  template = job_template.t_{priority}_{preemptible}");
    let _ = writeln!(out, "  pool     = gpu_pool.{}\n  quota    = quota.q{q:02}", pool_name(p));
    if i % 10 == 9 {
        let _ = writeln!(out, "  depends_on = [job.j{:06}]", i - 1);
    }
    out.push_str("}\n\n");
}
