provider "sim" {}

variable "nodes" {
  type    = number
  default = "three"
}

gpu_pool "a" {
  provider      = "sim"
  region        = "us-east-1"
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = var.nodes
    max     = 2
  }
}

gpu_pool "b" {
  provider      = "sim"
  region        = "us-east-1"
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = var.nodes
    max     = 2
  }
}
