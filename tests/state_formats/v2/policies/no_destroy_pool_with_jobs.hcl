# A pool must not be destroyed or replaced while jobs run on it: runs that state records
# as queued or running, as the plan's refresh saw them. Finished and cancelled jobs, and
# jobs the spec names but nothing runs, do not count. Soft, so that a destroy you mean
# can go ahead with `--override-policy no_destroy_pool_with_jobs` (recorded in state).
policy "no_destroy_pool_with_jobs" {
  enforcement = "soft"
  description = "pools with running jobs are not destroyed or replaced"
  for_each    = plan.pools
  assert      = !(each.value.destroys && length(each.value.running_jobs) > 0)
  message     = "${each.key} would be ${each.value.action == "delete" ? "destroyed" : "replaced"} under running ${join(", ", each.value.running_jobs)}; wait for ${length(each.value.running_jobs) == 1 ? "it" : "them"} to end, cancel with ${join(" and ", [for j in each.value.running_jobs : "`gpuplan jobs cancel ${j}`"])}, or pass `--override-policy no_destroy_pool_with_jobs`"
}
