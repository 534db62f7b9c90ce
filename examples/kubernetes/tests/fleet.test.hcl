# Tests of the Kubernetes example: `gpuplan test -C examples/kubernetes`. A test world has
# no cluster: the pool's `kubernetes {}` block is left out and its job runs on the pool's
# simulated nodes.

run "plan_from_nothing" {
  command = plan
  assert {
    condition     = plan.pools["gpu_pool.train"].nodes_after == 2 && plan.pools["gpu_pool.train"].spot_after == 1
    error_message = "one on-demand base node and one spot node"
  }
}

run "apply" {
  assert {
    condition     = [for j in plan.jobs : j.after if j.address == "job.llama_ft"] == ["running"]
    error_message = "the fine-tuning job starts"
  }
}
