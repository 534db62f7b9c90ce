# Tests of the Alibaba Cloud example: `gpuplan test -C examples/alicloud`, against a
# private simulated cloud with the same region, zones and instance type.

run "plan_from_nothing" {
  command = plan
  assert {
    condition     = plan.pools["gpu_pool.a10"].nodes_after == 4 && plan.pools["gpu_pool.a10"].on_demand_after == 3
    error_message = "2 on-demand base nodes, then half of the other 2 on spot"
  }
  assert {
    condition     = length([for p in plan.policies : p if !p.passed]) == 0
    error_message = "the serving quota passes"
  }
}

run "apply" {
  assert {
    condition     = length(state.resources["gpu_pool.a10"].nodes) == 4
    error_message = "the state records 4 nodes"
  }
}
