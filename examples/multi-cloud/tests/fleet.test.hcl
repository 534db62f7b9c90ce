# Tests of the multi-cloud example: `gpuplan test -C examples/multi-cloud`. All three
# providers are replaced by one private simulated cloud, each pool in its own region.

run "plan_from_nothing" {
  command = plan
  assert {
    condition     = length([for c in plan.changes : c if c.action == "create"]) == 4
    error_message = "three pools and the quota are created"
  }
  assert {
    condition     = plan.quotas["quota.inference"].gpus_after == 5
    error_message = "the quota counts the GPUs of all three clouds"
  }
}

run "apply_in_dependency_order" {
  assert {
    condition     = length(state.resources["gpu_pool.ali_a10"].nodes) == 1 && length(state.resources["gpu_pool.tencent_t4"].nodes) == 2
    error_message = "every cloud's pool is launched"
  }
}
