# Applied first (see tests/policies.rs): an on-demand L4 pool that a job runs on.
provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 1
    max     = 1
  }

  mix {
    spot_percent = 0
  }
}

job_template "finetune" {
  image = "ghcr.io/example/finetune:1.4"
  gpus  = 1
}

job "finetune" {
  template = job_template.finetune
  pool     = gpu_pool.train
}
