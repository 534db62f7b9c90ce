# Tests of the Tencent Cloud example: `gpuplan test -C examples/tencentcloud`, against a
# private simulated cloud with the same region, zones and instance types.

run "plan_from_nothing" {
  command = plan
  assert {
    condition     = plan.pools["gpu_pool.infer_t4"].nodes_after == 4 && plan.pools["gpu_pool.train_a100"].nodes_after == 1
    error_message = "4 T4 inference nodes and one A100 training node"
  }
}

run "apply" {
  assert {
    condition     = length(state.resources["gpu_pool.infer_t4"].nodes) == 4
    error_message = "the state records 4 inference nodes"
  }
}

run "settled" {
  command = plan
  assert {
    condition     = plan.summary.add + plan.summary.change + plan.summary.destroy == 0
    error_message = "an applied fleet plans no changes"
  }
}
