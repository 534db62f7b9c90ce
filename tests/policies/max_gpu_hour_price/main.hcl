# One H100 per node on p5.4xlarge, all on-demand (critical): 6.88 USD per GPU-hour, above 6.
provider "sim" {
  region = "us-east-1"
}

gpu_pool "serve" {
  provider       = "sim"
  gpu            = "H100"
  gpus_per_node  = 1
  instance_types = ["p5.4xlarge"]

  nodes {
    min     = 2
    desired = 2
    max     = 2
  }

  mix {
    spot_percent = 0
  }

  labels = { critical = "true" }
}
