# Pools not labelled critical should run at least 30 % of their nodes on spot.
policy "min_spot_share" {
  enforcement = "soft"
  description = "non-critical pools run at least 30% spot"
  for_each    = { for addr, pool in plan.pools : addr => pool if lookup(pool.labels, "critical", "false") != "true" && pool.nodes_after > 0 }
  assert      = each.value.spot_share >= 30
  message     = "${each.key} runs ${format("%.0f", each.value.spot_share)}% of its nodes on spot; non-critical pools should run at least 30% (label it critical = \"true\" or raise mix.spot_percent)"
}
