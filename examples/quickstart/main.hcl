# gpuplan quickstart: a small fleet on the embedded simulated cloud.
# No credentials needed. Try:
#   gpuplan validate -C examples/quickstart
#   gpuplan plan     -C examples/quickstart

provider "sim" {
  region = "us-east-1"
  seed   = 42
}

variable "team" {
  type        = string
  default     = "ml-research"
  description = "Team that owns the fleet; used in labels."
}

locals {
  labels = {
    team  = var.team
    owner = "platform"
  }
}

# Training nodes: 8 × A100 80GB each: one on-demand, then 70 % of the rest on spot.
gpu_pool "train" {
  provider       = "sim"
  zones          = ["us-east-1a", "us-east-1b"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  image          = "ami-gpuplan-cuda12"

  nodes {
    min     = 0
    desired = 3
    max     = 4
  }

  mix {
    on_demand_base = 1
    spot_percent   = 70
    fallback       = "on_demand"
  }

  labels = merge(local.labels, { workload = "training" })

  lifecycle {
    prevent_destroy = false
  }
}

# Inference nodes: one L4 each; gpuplan picks the cheapest matching instance type.
gpu_pool "inference" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 1
    desired = 2
    max     = 6
  }

  mix {
    spot_percent = 50
  }

  labels = merge(local.labels, { workload = "inference" })
}

quota "ml_team" {
  pools        = [gpu_pool.train, gpu_pool.inference]
  max_gpus     = 48
  allowed_gpus = ["A100-80GB", "L4"]

  budget {
    hourly_usd  = 150
    monthly_usd = 100000
  }
}

job_template "finetune" {
  image          = "ghcr.io/example/finetune:1.4"
  command        = ["python", "train.py"]
  env            = { EPOCHS = "3" }
  gpus           = 8
  priority       = "high"
  preemptible    = true
  max_runtime    = "6h"
  retries        = 2
  checkpoint_uri = "s3://example-checkpoints/${var.team}/finetune"
}

job "llama_finetune" {
  template = job_template.finetune
  pool     = gpu_pool.train
  quota    = quota.ml_team
  args     = ["--model", "llama-3-8b"]
  replicas = 1
}

autoscaler "inference" {
  pool              = gpu_pool.inference
  queue_wait        = "5m"
  utilization_above = 75
  idle_for          = "20m"
  step              = 1
  cooldown          = "10m"
}

output "train_gpus" {
  value       = gpu_pool.train.gpus_per_node * gpu_pool.train.nodes.desired
  description = "GPUs the training pool runs at its desired size."
}
