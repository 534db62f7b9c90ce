provider "sim" {
  region = "us-east-1"
}

gpu_pool "infer" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 2
    max     = 8
  }
}

job_template "eval" {
  image = "ghcr.io/example/eval:1"
  gpus  = 4
}

# 8 nodes hold 8 GPUs in all, but a replica runs on one node, which has 1.
job "eval" {
  template = job_template.eval
  pool     = gpu_pool.infer
}
