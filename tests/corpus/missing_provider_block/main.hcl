gpu_pool "train" {
  provider      = "aws"
  gpu           = "A100-80GB"
  gpus_per_node = 8

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}
