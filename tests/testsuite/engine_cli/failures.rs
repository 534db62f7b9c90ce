//! Injected provider failures: retried with backoff, and the fleet still converges.

use crate::engine_cli::{Fleet, small_spec};

#[test]
fn apply_converges_through_injected_failures() {
    let fleet = Fleet::new(&small_spec(4));
    let env = [("GPUPLAN_SIM_FAILURE_RATE", "0.3"), ("GPUPLAN_SIM_SEED", "11")];
    fleet.run_env(&["apply", "--auto-approve"], &env).expect(0);
    fleet.run_env(&["plan", "--detailed-exitcode"], &env).expect(0);
    assert_eq!(fleet.live_tagged().len(), 5);
}
