provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "sim"
  gpus_per_node = 8

  nodes {
    desired = 1
    max     = 2
  }
}
