# 19 on-demand p4de.24xlarge: 19 × 27.44705 = 521.49 USD/h, above the 500 USD/h cap.
provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider       = "sim"
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]

  nodes {
    min     = 19
    desired = 19
    max     = 19
  }

  mix {
    spot_percent = 0
  }
}
