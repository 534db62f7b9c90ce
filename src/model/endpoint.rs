//! [`Endpoint`]: an API endpoint override (`endpoint = "http://127.0.0.1:8080"` in a
//! provider block), parsed once where the spec is decoded and used by the HTTP clients.

/// A parsed endpoint: scheme and authority (`host[:port]`), no path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub scheme: String,
    pub authority: String,
}

impl Endpoint {
    /// Parse `https://host[:port]` or `http://host[:port]` (a trailing `/` is allowed).
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        let s = s.trim();
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| format!("`{s}` is not a URL: expected `https://HOST` or `http://HOST:PORT`"))?;
        if scheme != "http" && scheme != "https" {
            return Err(format!("`{s}` uses `{scheme}`: only `https` (and `http` for local test endpoints) work"));
        }
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains(['/', '?', '#', ' ', '@']) {
            return Err(format!("`{s}` must be just a scheme and a host, like `https://cvm.tencentcloudapi.com`"));
        }
        // The URL library drops a default port, so the signed `Host` must too.
        let default_port = if scheme == "https" { ":443" } else { ":80" };
        let authority = authority.strip_suffix(default_port).unwrap_or(authority);
        Ok(Endpoint { scheme: scheme.into(), authority: authority.into() })
    }

    pub fn url(&self, path_and_query: &str) -> String {
        format!("{}://{}{path_and_query}", self.scheme, self.authority)
    }
}
