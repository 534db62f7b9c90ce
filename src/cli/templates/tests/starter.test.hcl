# Tests of the starter fleet: `gpuplan test`. Each starter policy (policies/*.hcl) is shown
# passing, then failing: a run lists in `expect_failures` exactly the policies (and
# quotas) it expects to fail, and fails if any other one does, or if one of those passes.
# Every run plans (or applies) against a private simulated cloud: nothing here touches
# `state/`, and runs see what earlier `apply` runs of this file left.

run "every_policy_passes" {
  command = plan
  assert {
    condition     = length([for p in plan.policies : p if !p.passed]) == 0
    error_message = "the starter fleet passes every policy and quota check"
  }
}

run "min_spot_share_fails_on_demand_only" {
  command         = plan
  variables { spot_percent = 0 }
  expect_failures = [policy.min_spot_share]
}

run "max_gpu_hour_price_fails_on_demand_h100" {
  command = plan
  variables {
    gpu           = "H100"
    gpus_per_node = 8
    spot_percent  = 0
  }
  # An on-demand H100 costs 6.88 USD per GPU-hour; all on-demand, it also runs no spot.
  expect_failures = [policy.max_gpu_hour_price, policy.min_spot_share]
}

run "fleet_hourly_cap_fails_24_spot_h100_nodes" {
  command = plan
  variables {
    gpu           = "H100"
    gpus_per_node = 8
    nodes         = 24
  }
  expect_failures = [policy.fleet_hourly_cap]
}

run "allowed_gpu_models_fails_a100" {
  command = plan
  variables {
    gpu           = "A100-80GB"
    gpus_per_node = 8
  }
  # The quota's own `allowed_gpus` check fails with the policy.
  expect_failures = [policy.allowed_gpu_models, quota.starter]
}

run "apply_with_a_job" {
  variables { jobs = 1 }
  sim {
    job_duration = "2h"
  }
  assert {
    condition     = [for j in plan.jobs : j.after] == ["running"]
    error_message = "the job starts on the starter node"
  }
}

run "no_destroy_pool_with_jobs_fails_under_a_running_job" {
  command = plan
  # Another GPU model replaces the pool's nodes, under the running job.
  variables {
    jobs = 1
    gpu  = "A10G"
  }
  expect_failures = [policy.no_destroy_pool_with_jobs]
}

run "no_destroy_pool_with_jobs_passes_once_the_job_ended" {
  command = plan
  variables {
    jobs = 1
    gpu  = "A10G"
  }
  sim {
    advance = "3h"
  }
  assert {
    condition     = [for c in plan.changes : c.action if c.address == "gpu_pool.starter"] == ["replace"]
    error_message = "the pool is replaced, now that no job runs on it"
  }
}
