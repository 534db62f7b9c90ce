# A starter fleet on the embedded simulated cloud: no credentials needed.
#   gpuplan validate   check this file
#   gpuplan plan       see what apply would create and what it costs
#   gpuplan apply      create it (in the simulator)

provider "sim" {}

gpu_pool "starter" {
  provider      = "sim"
  region        = "us-east-1"
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }

  # Spot is the cheap way to run GPUs; the starter policy `min_spot_share`
  # (policies/min_spot_share.hcl) asks pools not labelled critical for at least 30 %.
  # When spot runs short, the node starts on-demand instead.
  mix {
    spot_percent = 100
    fallback     = "on_demand"
  }
}
