variable "env" {
  type    = string
  default = "prod"
}

locals {
  common_labels = { env = var.env, managed_by = "gpuplan" }
}

gpu_pool "aws_a10g" {
  provider      = "aws"
  zones         = ["us-east-1a", "us-east-1b"]
  gpu           = "A10G"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 2
    max     = 8
  }

  mix {
    on_demand_base = 1
    spot_percent   = 60
  }

  labels = local.common_labels
}

gpu_pool "tencent_t4" {
  provider      = "tencentcloud"
  gpu           = "T4"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 2
    max     = 4
  }

  mix {
    spot_percent = 100
    fallback     = "wait"
  }

  labels = local.common_labels
}

gpu_pool "ali_a10" {
  provider      = "alicloud"
  gpu           = "A10"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 1
    max     = 4
  }

  labels     = local.common_labels
  depends_on = [gpu_pool.tencent_t4]
}

quota "inference" {
  pools    = [gpu_pool.aws_a10g, gpu_pool.tencent_t4, gpu_pool.ali_a10]
  max_gpus = 16

  budget {
    hourly_usd = 40
  }
}
