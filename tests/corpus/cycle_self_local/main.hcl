locals {
  a = [local.a]
}
