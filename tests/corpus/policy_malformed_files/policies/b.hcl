policy "no_assert" {
  enforcement = "hard"
}

policy "dup" {
  assert = each.value.gpu == "L4"
}
