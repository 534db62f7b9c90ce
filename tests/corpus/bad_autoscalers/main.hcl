provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 1
    desired = 2
    max     = 4
  }
}

gpu_pool "fixed" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 2
    desired = 2
    max     = 2
  }
}

gpu_pool "upside_down" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 3
    desired = 2
    max     = 1
  }
}

autoscaler "missing" {
  pool = gpu_pool.trian
}

autoscaler "first" {
  pool = gpu_pool.train
  step = 5
}

autoscaler "second" {
  pool = gpu_pool.train
}

autoscaler "zero_step" {
  pool     = gpu_pool.upside_down
  step     = 0
  cooldown = "soon"
}

autoscaler "fixed" {
  pool              = gpu_pool.fixed
  utilization_above = 120
}
