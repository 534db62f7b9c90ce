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
    max     = 2
  }
}

job_template "finetune" {
  image = "ghcr.io/example/finetune:1.4"
  gpus  = 8
}

job "run" {
  template = job_template.finetune
  pool     = gpu_pool.trian
}
