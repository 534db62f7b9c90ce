# One fleet across three clouds. Credentials come from each cloud's standard
# environment variables (AWS_ACCESS_KEY_ID, TENCENTCLOUD_SECRET_ID,
# ALIBABA_CLOUD_ACCESS_KEY_ID, ...); never write them here.

provider "aws" {
  region = "us-east-1"
  image  = "ami-0123456789abcdef0"
  subnets = {
    "us-east-1a" = "subnet-0aaa1111"
    "us-east-1b" = "subnet-0bbb2222"
  }
  security_groups = ["sg-0gpuplan"]
}

provider "tencentcloud" {
  region      = "ap-guangzhou"
  image       = "img-gpuplan"
  cny_per_usd = 7.1
}

provider "alicloud" {
  region      = "cn-hangzhou"
  image       = "m-gpuplan"
  cny_per_usd = 7.1
}
