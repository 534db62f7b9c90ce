//! The fleet `benches/test_files.rs` times and `tests/testsuite/test_cli.rs` checks: a
//! 20-pool sim spec and two test files of 10 runs each (every third an apply).

use std::path::Path;

/// Write `main.hcl` and `tests/a.test.hcl`, `tests/b.test.hcl` into `dir`.
pub fn write_twenty_pool_tests(dir: &Path) {
    let mut spec = String::from("provider \"sim\" {\n  region = \"us-east-1\"\n}\n");
    for i in 0..20 {
        spec.push_str(&format!(
            "gpu_pool \"p{i}\" {{\n  provider = \"sim\"\n  zones = [\"us-east-1a\", \"us-east-1b\"]\n  gpu = \"L4\"\n  gpus_per_node = 1\n  nodes {{\n    min = 0\n    desired = 2\n    max = 4\n  }}\n  mix {{\n    spot_percent = 50\n  }}\n}}\n"
        ));
    }
    let mut runs = String::new();
    for i in 0..10 {
        let command = if i % 3 == 0 { "apply" } else { "plan" };
        runs.push_str(&format!(
            "run \"r{i}\" {{\n  command = {command}\n  assert {{\n    condition = length(plan.changes) >= 20\n    error_message = \"every pool is planned\"\n  }}\n}}\n"
        ));
    }
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(dir.join("tests/a.test.hcl"), &runs).unwrap();
    std::fs::write(dir.join("tests/b.test.hcl"), &runs).unwrap();
}
