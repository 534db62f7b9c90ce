gpu_pool "my pool" {
}
