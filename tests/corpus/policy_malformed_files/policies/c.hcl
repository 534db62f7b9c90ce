policy "broken" {
  assert = plan.cost.hourly_after <=
}
