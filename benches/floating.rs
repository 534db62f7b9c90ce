//! Replay benchmark for floating pools: 30 days of hourly spot prices over three sim
//! candidates, `gpuplan reconcile --once` after each hour, against (a) the offline optimum
//! with full knowledge of the trace (dynamic programming, the same cost per move), (b)
//! greedy cheapest-every-hour and (c) staying put. Targets: total cost within 1.05× of the
//! optimum, at most half of greedy's moves, the pool at full size every hour.
//!
//! ```sh
//! cargo bench --bench floating                      # release build
//! cargo bench --bench floating --profile dev        # reuses the test build's dependencies
//! GPUPLAN_BENCH_BIN=/tmp/gpuplan-old cargo bench --bench floating
//! GPUPLAN_BENCH_HOURS=168 cargo bench --bench floating
//! ```
//!
//! The trace is made here from public price shapes (deterministic, seeded): A100-80GB spot
//! around 1.45–1.70 USD per GPU-hour per region, a daily cycle peaking in each region's
//! afternoon (so the regions' cycles are hours apart), a slow random walk, and spikes of
//! +30–60 % lasting 2–8 hours about twice a week per region. The pool is 4 spot nodes of
//! 8 × A100-80GB. Every strategy is charged the same way: each hour at the price of the
//! region it runs in, and each move half an hour of the pool at the new region's price
//! (the overlap of new and old nodes, and the work a preemptible job redoes from its last
//! checkpoint). Lost job-hours are modelled the same way: half an hour of each node per move.

use std::path::Path;
use std::process::Command;

const REGIONS: [&str; 3] = ["us-east-1", "us-west-2", "cn-hangzhou"];
const NODES: f64 = 4.0;
const GPUS: f64 = NODES * 8.0;
/// What a move costs, in hours of the pool at the new region's price.
const MOVE_HOURS: f64 = 0.5;
const START: &str = "2026-03-01T00:00:00Z";
const START_SECS: u64 = 1_772_323_200; // 2026-03-01T00:00:00Z

const SPEC: &str = r#"
provider "sim" {
  seed = 11
}

gpu_pool "train" {
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = 4
    max     = 4
  }
  mix {
    spot_percent = 100
  }
  placement {
    candidates = [
      { provider = "sim", region = "us-east-1" },
      { provider = "sim", region = "us-west-2" },
      { provider = "sim", region = "cn-hangzhou" },
    ]
    strategy   = "cheapest"
    min_saving = 10
    min_stay   = "6h"
  }
}
"#;

fn main() {
    let hours: usize = std::env::var("GPUPLAN_BENCH_HOURS").ok().and_then(|h| h.parse().ok()).unwrap_or(720);
    let bin = std::env::var("GPUPLAN_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_gpuplan").to_string());
    let prices = trace(hours);
    let dir = tempfile::tempdir().expect("a temp dir");
    let d = dir.path();
    std::fs::write(d.join("main.hcl"), SPEC).expect("spec written");
    std::fs::write(d.join("trace.csv"), csv(&prices)).expect("trace written");
    gpuplan(&bin, d, &["sim", "trace", "trace.csv"]);

    let started = std::time::Instant::now();
    let mut path = Vec::with_capacity(hours);
    let mut short_hours = 0;
    for h in 0..hours {
        if h > 0 {
            gpuplan(&bin, d, &["sim", "advance", "1h"]);
        }
        gpuplan(&bin, d, &["reconcile", "--once"]);
        let (region, full) = placed(d);
        if !full {
            short_hours += 1;
        }
        path.push(REGIONS.iter().position(|r| *r == region).unwrap_or_else(|| panic!("hour {h}: placed in {region}")));
    }
    let elapsed = started.elapsed();

    let optimum = optimum(&prices);
    let greedy: Vec<usize> = prices.iter().map(cheapest).collect();
    let stay = vec![cheapest(&prices[0]); hours];
    println!("{hours} hours, 3 candidates, 4 × 8 A100-80GB spot; a move costs {MOVE_HOURS} h of the pool");
    println!(
        "reconcile passes took {:.1} s in all; the pool was short of 4 nodes in {short_hours} hour(s)\n",
        elapsed.as_secs_f64()
    );
    println!("| strategy | total cost USD | × optimum | moves | lost job-hours (modelled) |");
    println!("|---|---:|---:|---:|---:|");
    let best = cost(&prices, &optimum);
    for (name, p) in [
        ("gpuplan (min_saving 10 %, min_stay 6h)", &path),
        ("offline optimum (DP)", &optimum),
        ("greedy cheapest every hour", &greedy),
        ("stay put", &stay),
    ] {
        let (c, m) = (cost(&prices, p), moves(p));
        println!("| {name} | {c:.0} | {:.3} | {m} | {:.0} |", c / best, m as f64 * MOVE_HOURS * NODES);
    }
}

/// Spot USD per GPU-hour, per hour and region.
fn trace(hours: usize) -> Vec<[f64; 3]> {
    let base = [1.60, 1.45, 1.70];
    // Each region's afternoon peak, in UTC hours (us-east-1 15:00 local, us-west-2 three
    // hours later, cn-hangzhou twelve hours from us-east-1).
    let peak = [19.0, 22.0, 7.0];
    let mut rng = Lcg(0x5eed_f10a7);
    let mut walk = [0.0f64; 3];
    let mut spike = [(0usize, 0.0f64); 3];
    let mut out = Vec::with_capacity(hours);
    for h in 0..hours {
        let mut row = [0.0; 3];
        for r in 0..3 {
            walk[r] = 0.97 * walk[r] + 0.02 * rng.normal();
            if spike[r].0 == 0 && rng.unit() < 2.0 / 168.0 {
                spike[r] = (2 + (rng.unit() * 7.0) as usize, 0.3 + 0.3 * rng.unit());
            }
            let bump = if spike[r].0 > 0 {
                spike[r].0 -= 1;
                spike[r].1
            } else {
                0.0
            };
            let hour = (h % 24) as f64;
            let daily = 0.08 * (2.0 * std::f64::consts::PI * (hour - peak[r]) / 24.0).cos();
            row[r] = (base[r] * (1.0 + daily + walk[r] + bump)).max(0.3);
            row[r] = (row[r] * 10_000.0).round() / 10_000.0;
        }
        out.push(row);
    }
    out
}

fn csv(prices: &[[f64; 3]]) -> String {
    let mut s = String::from("time,provider,region,gpu,capacity,price_usd_hour,available_nodes\n");
    for (h, row) in prices.iter().enumerate() {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(START_SECS + h as u64 * 3600);
        let at = humantime::format_rfc3339_seconds(at);
        for (r, p) in row.iter().enumerate() {
            s += &format!("{at},sim,{},A100-80GB,spot,{p},\n", REGIONS[r]);
        }
    }
    s
}

/// Total cost of a path of regions: each hour at its region's price, each move half an
/// hour of the pool at the new region's price.
fn cost(prices: &[[f64; 3]], path: &[usize]) -> f64 {
    let mut c = 0.0;
    for (h, &r) in path.iter().enumerate() {
        c += prices[h][r] * GPUS;
        if h > 0 && path[h - 1] != r {
            c += prices[h][r] * GPUS * MOVE_HOURS;
        }
    }
    c
}

fn moves(path: &[usize]) -> usize {
    path.windows(2).filter(|w| w[0] != w[1]).count()
}

fn cheapest(row: &[f64; 3]) -> usize {
    (0..3).min_by(|a, b| row[*a].total_cmp(&row[*b])).unwrap_or(0)
}

/// The cheapest path with full knowledge of the trace: dynamic programming over (hour,
/// region) with the same move cost, then walked back.
fn optimum(prices: &[[f64; 3]]) -> Vec<usize> {
    let n = prices.len();
    let mut best = vec![[0.0f64; 3]; n];
    let mut from = vec![[0usize; 3]; n];
    for r in 0..3 {
        best[0][r] = prices[0][r] * GPUS;
        from[0][r] = r;
    }
    for h in 1..n {
        for r in 0..3 {
            let (mut b, mut f) = (f64::MAX, r);
            for (q, before) in best[h - 1].iter().enumerate() {
                let mv = if q == r { 0.0 } else { prices[h][r] * GPUS * MOVE_HOURS };
                let c = before + mv;
                if c < b {
                    (b, f) = (c, q);
                }
            }
            best[h][r] = b + prices[h][r] * GPUS;
            from[h][r] = f;
        }
    }
    let mut r = cheapest(&best[n - 1]);
    let mut path = vec![0; n];
    for h in (0..n).rev() {
        path[h] = r;
        r = from[h][r];
    }
    path
}

/// Where the pool lives after a pass, and whether it ran all 4 nodes there.
fn placed(dir: &Path) -> (String, bool) {
    let text = std::fs::read_to_string(dir.join("state/default.json")).expect("state");
    let state: serde_json::Value = serde_json::from_str(&text).expect("state JSON");
    let pool = &state["resources"]["gpu_pool.train"];
    let region = pool["placement"]["region"].as_str().unwrap_or("?").to_string();
    let nodes = pool["nodes"].as_array().map_or(0, |n| n.iter().filter(|n| n["region"] == region.as_str()).count());
    (region, nodes as f64 >= NODES)
}

fn gpuplan(bin: &str, dir: &Path, args: &[&str]) {
    let out = Command::new(bin)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("GPUPLAN_WORKSPACE")
        .env("GPUPLAN_SIM_START", START)
        .args(args)
        .output()
        .expect("gpuplan runs");
    assert!(
        out.status.success(),
        "gpuplan {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A small deterministic generator (no dependency, same numbers everywhere).
struct Lcg(u64);

impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Roughly standard normal (sum of uniforms).
    fn normal(&mut self) -> f64 {
        (0..12).map(|_| self.unit()).sum::<f64>() - 6.0
    }
}
