# Every pool a quota covers uses a GPU model the quota allows.
policy "allowed_gpu_models" {
  enforcement = "hard"
  description = "pools use the GPU models their quota allows"
  for_each    = { for addr, q in plan.quotas : addr => q if length(q.allowed_gpus) > 0 }
  assert      = length([for p in each.value.pools : p if contains(keys(plan.pools), p) && !contains(each.value.allowed_gpus, plan.pools[p].gpu)]) == 0
  message     = "${each.key} allows only ${join(", ", each.value.allowed_gpus)}, but ${join(", ", [for p in each.value.pools : "${p} uses ${plan.pools[p].gpu}" if contains(keys(plan.pools), p) && !contains(each.value.allowed_gpus, plan.pools[p].gpu)])}"
}
