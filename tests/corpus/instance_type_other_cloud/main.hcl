provider "aws" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "aws"
  gpu           = "A10"
  gpus_per_node = 1
  instance_types = ["ecs.gn7i-c8g1.2xlarge"]

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}
