# The quota allows only L4, but the pool it covers runs A100-80GB.
provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider       = "sim"
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]

  nodes {
    min     = 0
    desired = 1
    max     = 1
  }

  mix {
    spot_percent = 100
  }
}

quota "inference_team" {
  pools        = [gpu_pool.train]
  allowed_gpus = ["L4"]
}
