provider "tencentcloud" {
  region = "ap-guangzhou"
}

gpu_pool "train" {
  provider      = "tencentcloud"
  gpu           = "A100-40GB"
  gpus_per_node = 8
  zones         = ["ap-guangzhou-3", "ap-guangzhou-4"]

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}
