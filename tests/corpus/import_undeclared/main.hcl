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

import {
  to  = gpu_pool.trian
  ids = ["i-0abc"]
}
