variable "size" {
  type    = number
  default = "big"
}
