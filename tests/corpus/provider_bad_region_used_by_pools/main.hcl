provider "aws" {
  region = ["us-east-1"]
}

gpu_pool "a" {
  provider      = "aws"
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}
