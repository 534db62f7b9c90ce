gpuplan {
  backend "s3" {
    bucket     = "acme-state"
    access_key = "AKIAEXAMPLE"
    regoin     = "us-east-1"
    endpoint   = "cos.ap-guangzhou.myqcloud.com"
  }
  backend "gcss" {
    bucket = "x"
  }
}

provider "sim" {}
