//! Tencent Cloud API 3.0 signature, TC3-HMAC-SHA256 (reference B.2).
//!
//! gpuplan sends JSON POSTs, so the canonical query string is empty and the signed
//! headers are `content-type;host`, as the official SDKs sign them.

use super::{hex, hmac_sha256, sha256_hex, utc_date};

pub const ALGORITHM: &str = "TC3-HMAC-SHA256";

/// What to sign: one request as it goes on the wire.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The `Host` header exactly as sent (with `:port` when not the default).
    pub host: &'a str,
    /// The `Content-Type` header exactly as sent.
    pub content_type: &'a str,
    /// The product, e.g. `cvm` or `tke`: the credential scope's service.
    pub service: &'a str,
    /// `X-TC-Timestamp`, unix seconds.
    pub timestamp: u64,
    pub payload: &'a [u8],
}

/// Every step of a signature, for tests and for the fake endpoints.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    pub canonical_request: String,
    pub credential_scope: String,
    pub string_to_sign: String,
    pub signature: String,
    pub authorization: String,
}

pub const SIGNED_HEADERS: &str = "content-type;host";

pub fn sign(secret_id: &str, secret_key: &str, req: &Request<'_>) -> Signature {
    let canonical_request = format!(
        "{}\n/\n\ncontent-type:{}\nhost:{}\n\n{SIGNED_HEADERS}\n{}",
        req.method,
        req.content_type.trim(),
        req.host.trim(),
        sha256_hex(req.payload)
    );
    let date = utc_date(req.timestamp);
    let credential_scope = format!("{date}/{}/tc3_request", req.service);
    let string_to_sign =
        format!("{ALGORITHM}\n{}\n{credential_scope}\n{}", req.timestamp, sha256_hex(canonical_request.as_bytes()));
    let secret_date = hmac_sha256(format!("TC3{secret_key}").as_bytes(), date.as_bytes());
    let secret_service = hmac_sha256(&secret_date, req.service.as_bytes());
    let secret_signing = hmac_sha256(&secret_service, b"tc3_request");
    let signature = hex(&hmac_sha256(&secret_signing, string_to_sign.as_bytes()));
    let authorization = format!(
        "{ALGORITHM} Credential={secret_id}/{credential_scope}, SignedHeaders={SIGNED_HEADERS}, Signature={signature}"
    );
    Signature { canonical_request, credential_scope, string_to_sign, signature, authorization }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The official worked example (reference B.2), reproduced byte for byte.
    #[test]
    fn known_answer_from_the_tencent_documentation() {
        let payload = br#"{"Limit": 1, "Filters": [{"Values": ["\u672a\u547d\u540d"], "Name": "instance-name"}]}"#;
        assert_eq!(sha256_hex(payload), "35e9c5b0e3ae67532d3c9f17ead6c90222632e5b1ff7f6e89887f1398934f064");
        let req = Request {
            method: "POST",
            host: "cvm.tencentcloudapi.com",
            content_type: "application/json; charset=utf-8",
            service: "cvm",
            timestamp: 1551113065,
            payload,
        };
        let s = sign("AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE", "Gu5t9xGARNpq86cd98joQYCN3EXAMPLE", &req);
        assert_eq!(
            s.canonical_request,
            "POST\n/\n\ncontent-type:application/json; charset=utf-8\nhost:cvm.tencentcloudapi.com\n\ncontent-type;host\n35e9c5b0e3ae67532d3c9f17ead6c90222632e5b1ff7f6e89887f1398934f064"
        );
        assert_eq!(
            sha256_hex(s.canonical_request.as_bytes()),
            "5ffe6a04c0664d6b969fab9a13bdab201d63ee709638e2749d62a09ca18d7031"
        );
        assert_eq!(
            s.string_to_sign,
            "TC3-HMAC-SHA256\n1551113065\n2019-02-25/cvm/tc3_request\n5ffe6a04c0664d6b969fab9a13bdab201d63ee709638e2749d62a09ca18d7031"
        );
        let secret_date = hmac_sha256(b"TC3Gu5t9xGARNpq86cd98joQYCN3EXAMPLE", b"2019-02-25");
        assert_eq!(hex(&secret_date), "d1308c81fe71cfd4e06437bbc067b2b8a3d2d8c0e375d547f15c41d5214b395a");
        let secret_service = hmac_sha256(&secret_date, b"cvm");
        assert_eq!(hex(&secret_service), "3c7cb7c7795393edc14fd2e0e6434a518564b4504b88e94f5d11bf59ba3e7050");
        assert_eq!(
            hex(&hmac_sha256(&secret_service, b"tc3_request")),
            "ac658d5dde49e9bfdd14e04e062f66b05d9f637d44b8a8d845327d4a77f666b1"
        );
        assert_eq!(s.signature, "72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168");
        assert_eq!(
            s.authorization,
            "TC3-HMAC-SHA256 Credential=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE/2019-02-25/cvm/tc3_request, SignedHeaders=content-type;host, Signature=72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168"
        );
    }

    #[test]
    fn the_date_is_utc_not_beijing_time() {
        // 2019-02-25 23:30 UTC is already 02-26 in UTC+8; the scope must say 02-25.
        let req = Request {
            method: "POST",
            host: "cvm.tencentcloudapi.com",
            content_type: "application/json",
            service: "cvm",
            timestamp: 1551137400,
            payload: b"{}",
        };
        assert_eq!(sign("id", "key", &req).credential_scope, "2019-02-25/cvm/tc3_request");
    }
}
