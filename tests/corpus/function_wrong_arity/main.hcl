locals {
  x = upper("a", "b")
}
