# A T4 inference pool and an A100 training pool on Tencent Cloud CVM.
#
# Credentials come from TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY (never write
# them here). Prices in the plan are CNY converted at `cny_per_usd`.

provider "tencentcloud" {
  region      = "ap-guangzhou"
  image       = "img-gpuplan-ubuntu2204-cuda"
  cny_per_usd = 7.1
  subnets = {
    "ap-guangzhou-3" = "vpc-gpuplan/subnet-gz3"
    "ap-guangzhou-4" = "vpc-gpuplan/subnet-gz4"
  }
  security_groups = ["sg-gpuplan"]
}

gpu_pool "infer_t4" {
  provider       = "tencentcloud"
  zones          = ["ap-guangzhou-3", "ap-guangzhou-4"]
  gpu            = "T4"
  gpus_per_node  = 1
  instance_types = ["GN7.2XLARGE32"]

  nodes {
    min     = 0
    desired = 4
    max     = 8
  }

  mix {
    on_demand_base = 1
    spot_percent   = 75
    fallback       = "on_demand"
  }

  labels = { team = "inference" }
}

gpu_pool "train_a100" {
  provider      = "tencentcloud"
  zones         = ["ap-guangzhou-4"]
  gpu           = "A100-40GB"
  gpus_per_node = 8

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }

  mix {
    spot_percent   = 100
    fallback       = "wait"
    max_spot_price = 30
  }

  labels = { team = "research" }
}
