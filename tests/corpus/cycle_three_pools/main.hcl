provider "sim" {
  region = "us-east-1"
}

gpu_pool "a" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  depends_on = [gpu_pool.b]

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}

gpu_pool "b" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  depends_on = [gpu_pool.c]

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}

gpu_pool "c" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  depends_on = [gpu_pool.a]

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}
