# Tests of the YAML quickstart fleet (test files are HCL in every project):
# `gpuplan test -C examples/quickstart-yaml`.

run "plan_from_nothing" {
  command = plan
  assert {
    condition     = plan.pools["gpu_pool.train"].nodes_after == 3 && plan.pools["gpu_pool.inference"].nodes_after == 2
    error_message = "the plan launches 3 training and 2 inference nodes"
  }
  assert {
    condition     = length([for p in plan.policies : p if !p.passed]) == 0
    error_message = "every policy and quota passes"
  }
}

run "apply" {
  assert {
    condition     = length(state.resources["gpu_pool.inference"].nodes) == 2
    error_message = "the state records the 2 inference nodes"
  }
}

run "settled" {
  command = plan
  assert {
    condition     = plan.summary.add + plan.summary.change + plan.summary.destroy == 0
    error_message = "an applied fleet plans no changes"
  }
}
