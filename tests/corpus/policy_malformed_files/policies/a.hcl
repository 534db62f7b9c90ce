policy "cap" {
  enforcement = "strict"
  asert       = true
  assert      = plan.cost.hourly_after <= 500
}

policy "dup" {
  assert = true
}
