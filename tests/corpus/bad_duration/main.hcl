job_template "t" {
  image       = "x:1"
  max_runtime = "6 hours and a bit"
}
