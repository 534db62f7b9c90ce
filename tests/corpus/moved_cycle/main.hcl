provider "sim" {}

gpu_pool "train" {
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

moved {
  from = gpu_pool.a
  to   = gpu_pool.b
}

moved {
  from = gpu_pool.b
  to   = gpu_pool.a
}
