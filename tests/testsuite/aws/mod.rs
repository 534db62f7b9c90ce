//! Helpers shared by the AWS tests: the CLI fleet (`cli.rs`) and the scripted fake EC2
//! endpoint (`fake_ec2.rs`).

pub mod cli;
pub mod fake_ec2;
