gpu_pool "train" {
  gpu = 
}
