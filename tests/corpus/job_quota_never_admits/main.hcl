provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8

  nodes {
    min     = 0
    desired = 1
    max     = 4
  }
}

quota "team" {
  pools        = [gpu_pool.train]
  max_gpus     = 8
  allowed_gpus = ["H100"]
}

job_template "big" {
  image = "ghcr.io/example/big:1"
  gpus  = 8
}

job "big" {
  template = job_template.big
  pool     = gpu_pool.train
  quota    = quota.team
  replicas = 2
}
