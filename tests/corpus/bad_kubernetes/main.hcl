provider "sim" {
  region = "us-east-1"
}

# The cluster moved from the provider block to the pools' kubernetes blocks.
provider "tencentcloud" {
  region     = "ap-guangzhou"
  cluster_id = "cls-old"
}

# No cluster named at all.
gpu_pool "a" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    desired = 1
    max     = 2
  }
  kubernetes {
    namespace = "ml"
  }
}

# Both ways of naming the cluster, a context without a kubeconfig, a bad namespace.
gpu_pool "b" {
  provider      = "tencentcloud"
  gpu           = "A100-40GB"
  gpus_per_node = 8
  nodes {
    desired = 1
    max     = 2
  }
  kubernetes {
    cluster_id = "cls-8xk2p4"
    kubeconfig = "~/.kube/config"
    namespace  = "ML_Jobs"
  }
}

gpu_pool "c" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    desired = 1
    max     = 2
  }
  kubernetes {
    context   = "prod"
    namespce  = "ml"
  }
}

# A cluster id on a cloud whose kubeconfig gpuplan cannot fetch.
gpu_pool "d" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    desired = 1
    max     = 2
  }
  kubernetes {
    cluster_id = "cls-1"
  }
}
