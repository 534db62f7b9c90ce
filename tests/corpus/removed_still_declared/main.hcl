provider "sim" {}

gpu_pool "old" {
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

removed {
  from = gpu_pool.old
  lifecycle {
    destroy = false
  }
}
