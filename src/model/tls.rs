//! The TLS crypto provider every HTTPS client of the process shares (the Tencent and
//! Alibaba providers' client and the state backends' object-store client): rustls on
//! ring, installed once as the process default. Not I/O: process setup, kept at the
//! bottom layer so both the state and the providers can ask for it.

use std::sync::Once;

/// Install rustls's ring provider as the process default, once.
pub fn install_ring() {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // Another crate may have installed a provider first; either one works, and
        // `install_default` only fails in that case.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
