# Tests of the quickstart fleet: `gpuplan test -C examples/quickstart`. Each file runs
# against a private simulated cloud; runs go in order and see what earlier applies left.

variables {
  team = "ml-research"
}

run "plan_from_nothing" {
  command = plan
  assert {
    condition     = plan.pools["gpu_pool.train"].nodes_after == 3 && plan.pools["gpu_pool.inference"].nodes_after == 2
    error_message = "the plan launches 3 training and 2 inference nodes"
  }
  assert {
    condition     = plan.cost.hourly_after <= 150
    error_message = "the fleet stays within the ml_team budget of 150 USD/h"
  }
  assert {
    condition     = length([for p in plan.policies : p if !p.passed]) == 0
    error_message = "every policy and quota passes"
  }
}

run "apply" {
  assert {
    condition     = length(state.resources["gpu_pool.train"].nodes) == 3
    error_message = "the state records the 3 training nodes"
  }
  assert {
    condition     = output.train_gpus == 24
    error_message = "3 nodes of 8 GPUs"
  }
  assert {
    condition     = [for j in plan.jobs : j.after if j.address == "job.llama_finetune"] == ["running"]
    error_message = "the fine-tuning job starts on the new training nodes"
  }
}

run "settled" {
  command = plan
  assert {
    condition     = plan.summary.add + plan.summary.change + plan.summary.destroy == 0
    error_message = "an applied fleet plans no changes"
  }
}

run "spot_reclaim_is_replaced" {
  sim {
    interrupt {
      pool  = gpu_pool.train
      count = 1
    }
  }
  assert {
    condition     = plan.pools["gpu_pool.train"].nodes_before == 2 && plan.pools["gpu_pool.train"].nodes_after == 3
    error_message = "the reclaimed spot node is replaced"
  }
}
