policy "fleet_hourly_cap" {
  enforcement = "hard"
  assert      = plan.cost.hourly_after <= 100
  message     = "the fleet would cost ${format("%.2f", plan.cost.hourly_after)} USD/h"
}
