//! The AWS SDK's HTTP client, which reads the system's root certificates only for a
//! request that needs them.
//!
//! The SDK's rustls client loads the trust store (the system bundle and every file of
//! `/etc/ssl/certs`, about 150 files here) when the client is set up, before the first
//! call of every run: 5–15 ms of a 500-node create on this machine, on the path to its
//! first request, spent even when the endpoint is plain `http://` (moto, a local proxy,
//! a VPC endpoint behind a TLS-terminating proxy), where no certificate is ever checked.
//! Here each request picks one of two rustls clients by its URL's scheme: `https`
//! requests go to the client with the system's roots (the SDK's default, loaded the first
//! time one is made, once per process), `http` requests to one with an empty trust store,
//! which builds without reading a file. What is trusted for https is unchanged.

use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use aws_smithy_http_client::tls::{Provider, TlsContext, TrustStore};
use aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;

/// The client for the SDK configuration: the system's roots for https, none for http.
pub fn http_client() -> SharedHttpClient {
    let rustls = || aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring));
    let with_roots = rustls().build_https();
    match TlsContext::builder().with_trust_store(TrustStore::empty()).build() {
        Ok(no_roots) => {
            SharedHttpClient::new(ByScheme { plain: rustls().tls_context(no_roots).build_https(), tls: with_roots })
        }
        // The builder only stores the trust store and cannot fail today; if a later
        // version could, every request takes the client with the roots, as all did before.
        Err(_) => with_roots,
    }
}

/// Two clients, one per scheme.
#[derive(Debug, Clone)]
pub(crate) struct ByScheme {
    /// For `http://` URLs: its trust store is empty, so setting it up reads nothing.
    pub(crate) plain: SharedHttpClient,
    /// For everything else (`https://`): the system's roots.
    pub(crate) tls: SharedHttpClient,
}

impl HttpClient for ByScheme {
    /// A connector that asks the right client for its connector when a request comes:
    /// the clients cache their connectors, so this costs a lookup per request.
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(Pick {
            clients: self.clone(),
            settings: settings.clone(),
            components: components.clone(),
        })
    }

    fn connector_metadata(&self) -> Option<ConnectorMetadata> {
        self.tls.connector_metadata()
    }
}

/// One request's choice of client.
#[derive(Debug)]
struct Pick {
    clients: ByScheme,
    settings: HttpConnectorSettings,
    components: RuntimeComponents,
}

impl HttpConnector for Pick {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = if is_plain_http(request.uri()) { &self.clients.plain } else { &self.clients.tls };
        client.http_connector(&self.settings, &self.components).call(request)
    }
}

/// Whether `uri` is a plain `http://` URL (the scheme is case-insensitive).
pub(crate) fn is_plain_http(uri: &str) -> bool {
    uri.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_urls_skip_the_roots() {
        for plain in ["http://127.0.0.1:5000/", "HTTP://moto:5000", "http://ec2.internal"] {
            assert!(is_plain_http(plain), "{plain}");
        }
        for tls in ["https://ec2.us-east-1.amazonaws.com/", "HTTPS://x", "httpx://y", "http:/z", "", "ht"] {
            assert!(!is_plain_http(tls), "{tls}");
        }
    }
}
