provider "aws" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "aws"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  instance_types = ["p4de.24xlarg"]

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}
