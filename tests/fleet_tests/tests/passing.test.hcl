# Every run here passes.
variables {
  spot = 70
}

run "plan_from_nothing" {
  command = plan
  assert {
    condition     = plan.summary.add == 1 && plan.pools["gpu_pool.train"].nodes_after == 3
    error_message = "a fresh world gets the pool and its 3 nodes"
  }
  assert {
    condition     = output.train_gpus == 24
    error_message = "3 nodes of 8 GPUs"
  }
}

run "low_spot_is_denied" {
  command         = plan
  variables { spot = 0 }
  expect_failures = [policy.min_spot_share]
}

run "apply" {
  assert {
    condition     = length(state.resources["gpu_pool.train"].nodes) == 3
    error_message = "the state records 3 nodes"
  }
}

run "settled" {
  command = plan
  assert {
    condition     = plan.summary.add + plan.summary.change + plan.summary.destroy == 0
    error_message = "an applied fleet plans no changes"
  }
}

run "spot_reclaimed" {
  command = plan
  sim {
    interrupt {
      pool  = gpu_pool.train
      count = 1
    }
    advance = "1h"
  }
  assert {
    condition     = plan.pools["gpu_pool.train"].nodes_before == 2
    error_message = "the plan sees the reclaimed node gone"
  }
}
