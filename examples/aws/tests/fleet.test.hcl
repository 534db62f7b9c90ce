# Tests of the AWS example: `gpuplan test -C examples/aws`. The `aws` provider is replaced
# by a private simulated cloud with the same region and instance types: no AWS account,
# no credentials, nothing launched for real.

run "plan_from_nothing" {
  command = plan
  assert {
    condition     = plan.pools["gpu_pool.train"].nodes_after == 4
    error_message = "the pool starts at its desired 4 nodes"
  }
  assert {
    condition     = plan.pools["gpu_pool.train"].spot_after == 2
    error_message = "one on-demand base node, then 70 % of the other 3 on spot (rounded down)"
  }
  assert {
    condition     = plan.cost.hourly_after < 5
    error_message = "four A10G nodes cost less than 5 USD/h"
  }
}

run "apply" {
  assert {
    condition     = length(state.resources["gpu_pool.train"].nodes) == 4
    error_message = "the state records 4 nodes"
  }
}

run "falls_back_to_on_demand_without_spot" {
  sim {
    interrupt {
      pool  = gpu_pool.train
      count = 2
    }
    capacity {
      zone = "us-east-1a"
      spot = 0
    }
    capacity {
      zone = "us-east-1b"
      spot = 0
    }
  }
  assert {
    condition     = length([for n in state.resources["gpu_pool.train"].nodes : n if n.capacity == "on-demand"]) == 4
    error_message = "with no spot capacity left, `fallback = \"on_demand\"` replaces the reclaimed spot nodes on-demand"
  }
}
