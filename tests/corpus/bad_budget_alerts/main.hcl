provider "sim" {}

quota "ml" {
  notify = ["hooks.example.com/gpuplan"]
  budget {
    monthly_usd = 1000
    alert_at    = [80, 0, "most"]
  }
}
