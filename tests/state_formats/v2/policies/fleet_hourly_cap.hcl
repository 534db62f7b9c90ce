# The whole fleet must not cost more than this per hour after the change.
policy "fleet_hourly_cap" {
  enforcement = "hard"
  description = "fleet hourly cost stays under 500 USD/h"
  assert      = plan.cost.hourly_after <= 500
  message     = "the fleet would cost ${format("%.2f", plan.cost.hourly_after)} USD/h after this change, above the 500 USD/h cap"
}
