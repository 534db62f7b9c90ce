# A small fleet with policies and tests: the fixture of `gpuplan test`'s own tests
# (tests/testsuite/test_cli.rs). `tests/` holds one passing and one failing file.

provider "sim" {
  region = "us-east-1"
}

variable "spot" {
  type    = number
  default = 70
}

variable "desired" {
  type    = number
  default = 3
}

gpu_pool "train" {
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]

  nodes {
    min     = 0
    desired = var.desired
    max     = 8
  }

  mix {
    on_demand_base = 1
    spot_percent   = var.spot
    fallback       = "on_demand"
  }
}

output "train_gpus" {
  value = gpu_pool.train.gpus_per_node * gpu_pool.train.nodes.desired
}
