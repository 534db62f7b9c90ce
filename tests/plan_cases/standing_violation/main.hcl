provider "sim" {
  region = "us-east-1"
  seed   = 7
}

gpu_pool "train" {
  provider       = "sim"
  zones          = ["us-east-1a", "us-east-1b"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]

  nodes {
    min     = 0
    desired = 4
    max     = 8
  }

  mix {
    on_demand_base = 1
    spot_percent   = 50
    fallback       = "on_demand"
  }
}

gpu_pool "serve" {
  provider      = "sim"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 1
    desired = 2
    max     = 4
  }
}

quota "ml" {
  pools    = [gpu_pool.train, gpu_pool.serve]
  max_gpus = 64
}
