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

job_template "shard" {
  image = "ghcr.io/example/shard:1"
  gpus  = 3
}

# Two 3-GPU replicas fit one 8-GPU node; 5 replicas need 3 nodes, and all start together.
job "shards" {
  template = job_template.shard
  pool     = gpu_pool.train
  replicas = 5
}
