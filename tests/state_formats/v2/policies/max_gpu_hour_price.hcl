# No pool pays more than this per GPU-hour on average (spot and on-demand mixed).
policy "max_gpu_hour_price" {
  enforcement = "soft"
  description = "pools pay at most 6 USD per GPU-hour"
  for_each    = { for addr, pool in plan.pools : addr => pool if pool.gpus_after > 0 }
  assert      = each.value.price_per_gpu_hour <= 6
  message     = "${each.key} would pay ${format("%.2f", each.value.price_per_gpu_hour)} USD per GPU-hour on ${each.value.instance_type}, above 6 USD"
}
