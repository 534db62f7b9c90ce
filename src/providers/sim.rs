//! The embedded simulated cloud.
