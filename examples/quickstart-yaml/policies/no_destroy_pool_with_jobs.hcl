# A pool that jobs run on must not be destroyed or replaced out from under them.
policy "no_destroy_pool_with_jobs" {
  enforcement = "hard"
  description = "pools with jobs are not destroyed or replaced"
  for_each    = plan.pools
  assert      = !(each.value.destroys && each.value.runs_jobs)
  message     = "${each.key} runs jobs and would be ${each.value.action == "delete" ? "destroyed" : "replaced"}; move or remove the jobs first"
}
