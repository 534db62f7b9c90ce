provider "sim" {
  region = "us-east-1"
}

gpu_pools "train" {
  provider = "sim"
}

node_group "x" {
}
