provider "simm" {
  region = "us-east-1"
}

gpu_pool "a" {
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

gpu_pool "b" {
  provider      = "simm"
  region        = "us-east-1"
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}
