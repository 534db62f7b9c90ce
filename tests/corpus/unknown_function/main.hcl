locals {
  labels = mergee({ a = "1" }, { b = "2" })
}
