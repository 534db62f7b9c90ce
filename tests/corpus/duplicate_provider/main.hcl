provider "sim" {
  region = "us-east-1"
}

provider "sim" {
  region = "us-west-2"
}
