provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider = "sim"
  zones    = ["us-east-1a", "us-east-1b"
  gpu      = "A100-80GB"
}
