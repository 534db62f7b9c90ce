provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]

  nodes {
    min     = 0
    desired = 3
    max     = 4
  }

  mix {
    on_demand_base = 2
    spot_percent   = 100
    fallback       = "on_demand"
  }
}

quota "ml" {
  pools    = [gpu_pool.train]
  max_gpus = 24
}

quota "h100_only" {
  pools        = [gpu_pool.train]
  allowed_gpus = ["H100"]
}

job_template "serve" {
  image    = "ghcr.io/example/serve:2"
  gpus     = 8
  priority = "critical"
}

job_template "finetune" {
  image          = "ghcr.io/example/finetune:1.4"
  gpus           = 8
  priority       = "high"
  preemptible    = true
  retries        = 2
  checkpoint_uri = "s3://ckpt/finetune"
}

job_template "eval" {
  image    = "ghcr.io/example/eval:1"
  gpus     = 4
  priority = "low"
}

job "serve" {
  template = job_template.serve
  pool     = gpu_pool.train
  quota    = quota.ml
}

job "sweep" {
  count    = 2
  template = job_template.finetune
  pool     = gpu_pool.train
  quota    = quota.ml
}

job "eval" {
  template = job_template.eval
  pool     = gpu_pool.train
  quota    = quota.ml
}

job "wrong_gpu" {
  template = job_template.eval
  pool     = gpu_pool.train
  quota    = quota.h100_only
}
