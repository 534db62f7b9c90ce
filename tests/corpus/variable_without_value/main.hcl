variable "team" {
  type = string
}
