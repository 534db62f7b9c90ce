provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 1
    max     = 4
  }

  lifecycle {
    # A typo, a sub-attribute of a plain value, and a field `nodes` does not have.
    ignore_changes = [nodes.desird, gpu.model, nodes.size, labels.team]
  }
}
