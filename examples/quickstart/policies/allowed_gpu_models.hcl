# Every pool a quota covers uses a GPU model the quota allows. (`lookup(plan.pools, p, null)`
# finds one pool; `contains(keys(plan.pools), p)` would build the list of every pool for
# each pool of the quota.)
policy "allowed_gpu_models" {
  enforcement = "hard"
  description = "pools use the GPU models their quota allows"
  for_each    = { for addr, q in plan.quotas : addr => q if length(q.allowed_gpus) > 0 }
  assert      = length([for p in each.value.pools : p if lookup(plan.pools, p, null) != null && !contains(each.value.allowed_gpus, plan.pools[p].gpu)]) == 0
  message     = "${each.key} allows only ${join(", ", each.value.allowed_gpus)}, but ${join(", ", [for p in each.value.pools : "${p} uses ${plan.pools[p].gpu}" if lookup(plan.pools, p, null) != null && !contains(each.value.allowed_gpus, plan.pools[p].gpu)])}"
}
