provider "aws" {
  region = "us-east-1"
  image  = "ami-0123456789abcdef0"
}

provider "tencentcloud" {
  region = "ap-guangzhou"
  image  = "img-gpuplan"
}

gpu_pool "vm" {
  provider       = "aws"
  gpu            = "A10G"
  gpus_per_node  = 1
  instance_types = ["g5.xlarge"]
  nodes {
    desired = 0
    max     = 2
  }
}

gpu_pool "cluster" {
  provider       = "aws"
  gpu            = "A10G"
  gpus_per_node  = 1
  instance_types = ["g5.xlarge"]
  nodes {
    desired = 0
    max     = 2
  }
  kubernetes {
    kubeconfig   = "kube/config"
    service_cidr = "10.100.0.0/16"
  }
}

gpu_pool "cn" {
  provider       = "tencentcloud"
  zones          = ["ap-guangzhou-6"]
  gpu            = "A10"
  gpus_per_node  = 1
  nodes {
    desired = 0
    max     = 2
  }
}

job_template "t" {
  image = "ghcr.io/acme/trainer:1"
  gpus  = 1
  env = {
    HF_TOKEN = secret("aws-sm:ml/hf-token")
  }
}

job "on_vm" {
  template = job_template.t
  pool     = gpu_pool.vm
  env = {
    REGISTRY = secret("k8s:registry/password")
  }
}

job "in_cluster" {
  template = job_template.t
  pool     = gpu_pool.cluster
}

job "in_china" {
  template = job_template.t
  pool     = gpu_pool.cn
}
