# Runs that fail on purpose: a wrong assert, an expected failure that does not happen,
# an unexpected denial, and an assert that cannot be evaluated.
run "wrong_assert" {
  command = plan
  assert {
    condition     = plan.summary.add == 2 && var.spot > 80
    error_message = "expected ${var.spot}% spot to be more"
  }
}

run "expects_a_passing_policy_to_fail" {
  command         = plan
  expect_failures = [policy.min_spot_share]
}

run "over_the_cap" {
  variables { desired = 8 }
}

run "broken_assert" {
  command = plan
  assert {
    condition     = plan.summry.add == 1
    error_message = "never checked"
  }
}

run "after_the_broken_one" {
  command = plan
}
