# Jobs as Kubernetes Jobs in any cluster you have a kubeconfig for (kind, minikube,
# EKS, self-managed): the sim cloud keeps the pool's accounting, the cluster runs the
# Jobs. The cluster needs the PriorityClasses gpuplan-critical, -high, -medium and -low,
# and nodes labelled gpuplan.dev/pool=train (see README, "Kubernetes").

provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = 2
    max     = 4
  }
  mix {
    on_demand_base = 1
    spot_percent   = 100
  }
  kubernetes {
    kubeconfig = "~/.kube/config" # a relative path is relative to this folder
    context    = "kind-gpu"       # default: the current context
    namespace  = "ml"
  }
}

job_template "finetune" {
  image          = "ghcr.io/example/finetune:1.4"
  gpus           = 8
  priority       = "high"
  preemptible    = true
  retries        = 2
  checkpoint_uri = "s3://example-ckpt/ft"
}

job "llama_ft" {
  template = job_template.finetune
  pool     = gpu_pool.train
  replicas = 1
}
