provider "aws" {
  region = "us-east-1"
  seed   = 42
}
