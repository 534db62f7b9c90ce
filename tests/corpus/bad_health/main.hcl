provider "sim" {
  region = "us-east-1"
}

# Every attribute of `health` wrong once: an unknown readiness check, a signal that is
# no signal, an unknown action, a percentage for max_repairs, a grace without a unit,
# and an attribute health does not take.
gpu_pool "train" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    desired = 1
    max     = 2
  }
  health {
    readiness   = "dcgm2"
    signals     = ["xid_fatal", "xid_79"]
    action      = "reboot"
    max_repairs = "20%"
    grace       = "5"
    repair      = true
  }
}

# An empty list of signals counts no fault: say so.
gpu_pool "serve" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    desired = 1
    max     = 2
  }
  health {
    signals = []
  }
}
