provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    desired = 1
    max     = 2
  }
}

job_template "t" {
  image = "ghcr.io/acme/trainer:1"
  gpus  = 8
  env = {
    HF_TOKEN = secret("vault:ml/hf-token")
    WANDB    = secret("ssm:ml/wandb")
  }
}

job "a" {
  template = job_template.t
  pool     = gpu_pool.train
  env = {
    REGISTRY = secret("k8s:registry")
  }
}
