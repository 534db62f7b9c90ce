locals {
  a = local.b
  b = "${local.a}-x"
}
