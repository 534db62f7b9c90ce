//! Running the gpuplan binary on a spec folder of the embedded sim cloud, as the
//! scheduling and spend tests do: plain output, a wide terminal (table lines are not
//! wrapped), no workspace from the environment, and the sim clock of a new world starting
//! at a fixed time.

use std::path::Path;
use std::process::Command;

/// `GPUPLAN_SIM_START` of every run: spend and clocks read the same in every test.
pub const SIM_START: &str = "2026-03-10T00:00:00Z";

/// `(exit code, stdout, stderr)` of `gpuplan ARGS` in `dir`.
pub fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .env_remove("GPUPLAN_WORKSPACE")
        .env("GPUPLAN_SIM_START", SIM_START)
        .args(args)
        .output()
        .expect("gpuplan runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
