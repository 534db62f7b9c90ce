provider "gcp" {
  region = "us-central1"
}
