locals {
  y = local.x
}
