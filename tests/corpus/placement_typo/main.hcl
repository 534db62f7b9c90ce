provider "sim" {}

gpu_pool "floating" {
  gpu           = "L4"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }

  placement {
    candidates = [
      { provider = "sim", region = "us-east-1" },
    ]
    strategy = "cheapst"
  }
}

gpu_pool "unplaced" {
  gpu           = "L4x"
  gpus_per_node = 1

  nodes {
    min     = 0
    desired = 1
    max     = 2
  }

  placement {
    candidats = [
      { provider = "sim", region = "us-east-1" },
    ]
  }
}
