# An example fleet for the Deployment. The state must be remote (the replicas share it,
# and /spec is read-only): replace the bucket, then the pools with your own.
gpuplan {
  backend "s3" {
    bucket = "example-gpuplan-state"
    key    = "fleets/prod.json"
    region = "us-east-1"
  }
}

provider "aws" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "aws"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 2
    max     = 8
  }
  mix {
    on_demand_base = 0
    spot_percent   = 50
  }
}
