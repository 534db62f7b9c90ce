provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider = "sim
  gpu      = "A100-80GB"
}
