# 4 L4 nodes, 25 % on spot: below the 30 % that non-critical pools should run.
provider "sim" {
  region = "us-east-1"
}

gpu_pool "inference" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 4
    desired = 4
    max     = 4
  }

  mix {
    spot_percent = 25
  }
}
