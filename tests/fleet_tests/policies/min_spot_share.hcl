policy "min_spot_share" {
  enforcement = "soft"
  for_each    = { for addr, pool in plan.pools : addr => pool if pool.nodes_after > 0 }
  assert      = each.value.spot_share >= 30
  message     = "${each.key} runs ${format("%.0f", each.value.spot_share)}% on spot"
}
