gpu_pool 42 {
  provider = "sim"
}
