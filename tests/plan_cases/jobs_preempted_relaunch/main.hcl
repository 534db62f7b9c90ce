provider "sim" {
  region       = "us-east-1"
  seed         = 11
  job_duration = "1h"
}

gpu_pool "train" {
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]

  nodes {
    min     = 0
    desired = 2
    max     = 4
  }

  mix {
    on_demand_base = 1
    spot_percent   = 100
    fallback       = "on_demand"
  }
}

job_template "finetune" {
  image          = "ghcr.io/example/finetune:1.4"
  command        = ["python", "train.py"]
  gpus           = 8
  priority       = "high"
  preemptible    = true
  retries        = 2
  checkpoint_uri = "s3://ckpt/finetune"
}

job "finetune" {
  template = job_template.finetune
  pool     = gpu_pool.train
}
