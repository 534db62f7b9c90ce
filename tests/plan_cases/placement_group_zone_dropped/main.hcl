provider "aws" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider       = "aws"
  zones          = ["us-east-1a"]
  gpu            = "H100"
  gpus_per_node  = 8
  instance_types = ["p5.48xlarge"]
  image          = "ami-0123456789abcdef0"

  nodes {
    min     = 0
    desired = 2
    max     = 4
  }

  network {
    placement_group = "cluster"
  }
}
