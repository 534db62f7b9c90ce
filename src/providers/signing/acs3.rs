//! Alibaba Cloud signature V3, ACS3-HMAC-SHA256 (reference C.3): RPC APIs (ECS) sign
//! `/` with their parameters in the query; ROA APIs (ACK) sign the resource path.

use std::collections::BTreeMap;

use super::{hex, hmac_sha256, percent_encode, sha256_hex};

pub const ALGORITHM: &str = "ACS3-HMAC-SHA256";

/// What to sign. `headers` are lowercase names to values as sent; `host`,
/// `content-type` and every `x-acs-*` header among them are signed.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The path, not yet encoded (`/` for RPC APIs).
    pub path: &'a str,
    pub query: &'a [(String, String)],
    pub headers: &'a BTreeMap<String, String>,
    /// Lowercase hex SHA-256 of the body (the `x-acs-content-sha256` header).
    pub payload_hash: &'a str,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    pub canonical_request: String,
    pub signed_headers: String,
    pub string_to_sign: String,
    pub signature: String,
    pub authorization: String,
}

/// Query parameters sorted by name and encoded: the canonical query string, which is
/// also the query string to send.
pub fn canonical_query(params: &[(String, String)]) -> String {
    let mut enc: Vec<(String, String)> = params.iter().map(|(k, v)| (percent_encode(k), percent_encode(v))).collect();
    enc.sort();
    enc.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

/// A path with each segment encoded and the slashes kept.
pub fn canonical_uri(path: &str) -> String {
    if path.is_empty() {
        return "/".into();
    }
    path.split('/').map(percent_encode).collect::<Vec<_>>().join("/")
}

fn signed(name: &str) -> bool {
    name == "host" || name == "content-type" || name.starts_with("x-acs-")
}

pub fn sign(access_key_id: &str, access_key_secret: &str, req: &Request<'_>) -> Signature {
    let names: Vec<&String> = req.headers.keys().filter(|k| signed(k)).collect();
    let canonical_headers: String = names.iter().map(|k| format!("{k}:{}\n", req.headers[k.as_str()].trim())).collect();
    let signed_headers = names.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(";");
    let canonical_request = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{}",
        req.method,
        canonical_uri(req.path),
        canonical_query(req.query),
        req.payload_hash
    );
    let string_to_sign = format!("{ALGORITHM}\n{}", sha256_hex(canonical_request.as_bytes()));
    let signature = hex(&hmac_sha256(access_key_secret.as_bytes(), string_to_sign.as_bytes()));
    let authorization =
        format!("{ALGORITHM} Credential={access_key_id},SignedHeaders={signed_headers},Signature={signature}");
    Signature { canonical_request, signed_headers, string_to_sign, signature, authorization }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    /// The official worked example (reference C.3), reproduced byte for byte.
    #[test]
    fn known_answer_from_the_alibaba_documentation() {
        let query = vec![
            ("ImageId".to_string(), "win2019_1809_x64_dtc_zh-cn_40G_alibase_20230811.vhd".to_string()),
            ("RegionId".to_string(), "cn-shanghai".to_string()),
        ];
        let headers: BTreeMap<String, String> = [
            ("host", "ecs.cn-shanghai.aliyuncs.com"),
            ("x-acs-action", "RunInstances"),
            ("x-acs-version", "2014-05-26"),
            ("x-acs-date", "2023-10-26T10:22:32Z"),
            ("x-acs-signature-nonce", "3156853299f313e23d1673dc12e1703d"),
            ("x-acs-content-sha256", EMPTY),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let req = Request { method: "POST", path: "/", query: &query, headers: &headers, payload_hash: EMPTY };
        let s = sign("YourAccessKeyId", "YourAccessKeySecret", &req);
        assert_eq!(
            s.canonical_request,
            format!(
                "POST\n/\nImageId=win2019_1809_x64_dtc_zh-cn_40G_alibase_20230811.vhd&RegionId=cn-shanghai\n\
                 host:ecs.cn-shanghai.aliyuncs.com\nx-acs-action:RunInstances\nx-acs-content-sha256:{EMPTY}\n\
                 x-acs-date:2023-10-26T10:22:32Z\nx-acs-signature-nonce:3156853299f313e23d1673dc12e1703d\n\
                 x-acs-version:2014-05-26\n\n\
                 host;x-acs-action;x-acs-content-sha256;x-acs-date;x-acs-signature-nonce;x-acs-version\n{EMPTY}"
            )
        );
        assert_eq!(
            s.string_to_sign,
            "ACS3-HMAC-SHA256\n7ea06492da5221eba5297e897ce16e55f964061054b7695beedaac1145b1e259"
        );
        assert_eq!(s.signature, "06563a9e1b43f5dfe96b81484da74bceab24a1d853912eee15083a6f0f3283c0");
        assert_eq!(
            s.authorization,
            "ACS3-HMAC-SHA256 Credential=YourAccessKeyId,SignedHeaders=host;x-acs-action;x-acs-content-sha256;x-acs-date;x-acs-signature-nonce;x-acs-version,Signature=06563a9e1b43f5dfe96b81484da74bceab24a1d853912eee15083a6f0f3283c0"
        );
    }

    #[test]
    fn query_and_paths_are_encoded_like_the_doc_says() {
        let q = vec![("Tag.1.Key".into(), "gpuplan:managed".into()), ("A".into(), "x y*~".into())];
        assert_eq!(canonical_query(&q), "A=x%20y%2A~&Tag.1.Key=gpuplan%3Amanaged");
        assert_eq!(canonical_uri("/k8s/c-1 2/user_config"), "/k8s/c-1%202/user_config");
        assert_eq!(canonical_uri("/"), "/");
    }
}
