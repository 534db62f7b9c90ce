# An A10G training pool on AWS EC2: 1 on-demand node plus spot, over two zones.
#
# Against real AWS: credentials come from the standard chain (AWS_ACCESS_KEY_ID /
# AWS_SECRET_ACCESS_KEY, AWS_PROFILE or `profile` below, SSO-less shared config, web
# identity, instance metadata). Set `image` to an AMI with the NVIDIA driver and Docker
# (for example an AWS Deep Learning AMI of your region).
#
# Against a local EC2 emulator (moto), see "Trying the AWS provider locally" in the
# README: `AWS_ENDPOINT_URL=http://127.0.0.1:5000` plus dummy credentials, or set
# `endpoint` below.

variable "image" {
  type    = string
  default = "ami-0123456789abcdef0"
}

provider "aws" {
  region = "us-east-1"
  # endpoint             = "http://127.0.0.1:5000"   # moto, LocalStack or a private endpoint
  # profile              = "gpu-admin"
  # subnets              = { "us-east-1a" = "subnet-0aaa...", "us-east-1b" = "subnet-0bbb..." }
  # security_groups      = ["sg-0123..."]
  # key_name             = "ops"
  # iam_instance_profile = "gpu-node"
  image = var.image
}

gpu_pool "train" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b"]
  gpu            = "A10G"
  gpus_per_node  = 1
  instance_types = ["g5.xlarge", "g5.2xlarge"]

  nodes {
    min     = 0
    desired = 4
    max     = 16
  }

  mix {
    on_demand_base = 1
    spot_percent   = 70
    fallback       = "on_demand"
    max_spot_price = 1.0
  }

  labels = { team = "ml", env = "dev" }
}
