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
}
