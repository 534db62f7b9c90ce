policy "gpu_models" {
  assert = each.value.gpu == "L4"
}
