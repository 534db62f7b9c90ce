# A starter fleet on the embedded simulated cloud: no credentials needed.
#   gpuplan validate   check this file, the policies and the tests
#   gpuplan plan       see what apply would create and what it costs
#   gpuplan apply      create it (in the simulator)
#   gpuplan test       run tests/starter.test.hcl: each starter policy passing and failing

provider "sim" {}

# The fleet's shape, as variables: change them here, with `--var`, or in a test's run.
variable "gpu" {
  type    = string
  default = "L4"
}

variable "gpus_per_node" {
  type    = number
  default = 1
}

variable "nodes" {
  type    = number
  default = 2
}

variable "spot_percent" {
  type    = number
  default = 100
}

variable "jobs" {
  type    = number
  default = 0
}

gpu_pool "starter" {
  provider      = "sim"
  region        = "us-east-1"
  gpu           = var.gpu
  gpus_per_node = var.gpus_per_node

  nodes {
    min     = 0
    desired = var.nodes
    max     = max(2, var.nodes)
  }

  # Spot is the cheap way to run GPUs; the starter policy `min_spot_share`
  # (policies/min_spot_share.hcl) asks pools not labelled critical for at least 30 %.
  # When spot runs short, the node starts on-demand instead.
  mix {
    spot_percent = var.spot_percent
    fallback     = "on_demand"
  }
}

# A team's limits over its pools; the starter policy `allowed_gpu_models` checks them too.
quota "starter" {
  pools        = [gpu_pool.starter]
  allowed_gpus = ["L4", "A10G", "H100"]
}

job_template "hello" {
  image       = "ghcr.io/example/hello-gpu:1.0"
  command     = ["nvidia-smi"]
  gpus        = 1
  preemptible = true # may run on spot nodes
}

# `var.jobs` copies of the job, on the starter pool.
job "hello" {
  count    = var.jobs
  template = job_template.hello
  pool     = gpu_pool.starter
  quota    = quota.starter
}
