policy "min_spot" {
  enforcement = "soft"
  for_each    = { for addr, pool in plan.pools : addr => pool if pool.nodes_afer > 0 }
  assert      = each.value.spot_shar >= 30
  message     = "${each.key} runs ${each.value.spot_share}% spot"
}

policy "cap" {
  assert  = plan.cost.hourly_aftr <= 500 && lenght(plan.changes) < 100
  message = "the fleet would cost ${plan.cost.monthly.total}"
}
