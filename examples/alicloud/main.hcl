# An A10 pool on Alibaba Cloud ECS, half on spot.
#
# Credentials come from ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET
# (never write them here). Prices in the plan are CNY converted at `cny_per_usd`.

provider "alicloud" {
  region      = "cn-hangzhou"
  image       = "m-gpuplan-ubuntu2204-cuda"
  cny_per_usd = 7.1
  subnets = {
    "cn-hangzhou-h" = "vsw-gpuplan-h"
    "cn-hangzhou-i" = "vsw-gpuplan-i"
  }
  security_groups = ["sg-gpuplan"]
}

gpu_pool "a10" {
  provider       = "alicloud"
  zones          = ["cn-hangzhou-h", "cn-hangzhou-i"]
  gpu            = "A10"
  gpus_per_node  = 1
  instance_types = ["ecs.gn7i-c8g1.2xlarge"]

  nodes {
    min     = 1
    desired = 4
    max     = 12
  }

  mix {
    on_demand_base = 2
    spot_percent   = 50
    fallback       = "on_demand"
  }

  labels = { team = "serving" }
}

quota "serving" {
  pools    = [gpu_pool.a10]
  max_gpus = 12

  budget {
    hourly_usd = 20
  }
}
