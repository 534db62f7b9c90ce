//! AWS KMS for the `aws_kms` key provider of `encryption {}` (docs/design/secrets.md):
//! `GenerateDataKey` (AES_256) for the data key a sealed file is encrypted with, and
//! `Decrypt` to unwrap it again. Two JSON 1.1 calls (`X-Amz-Target: TrentService.<Action>`)
//! signed with the `aws-sigv4` crate, as `ssm.rs` does, instead of an `aws-sdk-kms` crate.
//!
//! The state layer is synchronous, so each call runs to completion on a thread of its own
//! with a small runtime ([`block`]); it happens at most once per process and data key.
//!
//! The endpoint is the key provider's `endpoint`, else `AWS_ENDPOINT_URL_KMS`, else
//! `AWS_ENDPOINT_URL`, else `https://kms.<region>.amazonaws.com`. Credentials: the AWS
//! chain ([`super::credentials`]).

use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine as _;
use serde_json::{Value, json};

use super::credentials::{AwsCredentials, ChainSettings};
use crate::model::encryption::{DataKey, DataKeys, KmsKey};

/// A KMS client over the AWS credential chain.
pub struct Kms {
    credentials: Arc<AwsCredentials>,
}

impl Kms {
    pub fn new() -> Kms {
        Kms { credentials: AwsCredentials::new(ChainSettings::default()) }
    }
}

impl Default for Kms {
    fn default() -> Self {
        Kms::new()
    }
}

impl DataKeys for Kms {
    fn generate(&self, key: &KmsKey) -> Result<DataKey, String> {
        let doc = block(self.call(key, "GenerateDataKey", json!({"KeyId": key.key_id, "KeySpec": "AES_256"})))?;
        let plain = bytes_of(&doc, "Plaintext")?;
        let wrapped = bytes_of(&doc, "CiphertextBlob")?;
        Ok(DataKey { plain: key_bytes(&plain)?, wrapped })
    }

    fn unwrap(&self, key: &KmsKey, wrapped: &[u8]) -> Result<[u8; 32], String> {
        let blob = base64::engine::general_purpose::STANDARD.encode(wrapped);
        let doc = block(self.call(key, "Decrypt", json!({"KeyId": key.key_id, "CiphertextBlob": blob})))?;
        key_bytes(&bytes_of(&doc, "Plaintext")?)
    }
}

impl Kms {
    /// One signed KMS call, answering its JSON document or a message naming the error.
    async fn call(&self, key: &KmsKey, action: &str, body: Value) -> Result<Value, String> {
        let creds = self.credentials.get().await.map_err(|e| format!("no AWS credentials for KMS {action}: {e}"))?;
        let url = format!("{}/", endpoint(key).trim_end_matches('/'));
        let payload = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
        let target = format!("TrentService.{action}");
        let headers = [("content-type", "application/x-amz-json-1.1"), ("x-amz-target", target.as_str())];
        let signed = sign(&creds, &key.region, &url, &headers, &payload)?;
        let client = crate::providers::http::client().map_err(|e| e.message.clone())?;
        let mut req = client.post(&url).body(payload);
        for (k, v) in headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).chain(signed) {
            req = req.header(k, v);
        }
        let resp = req.send().await.map_err(|e| format!("KMS {action} failed: {e}"))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| format!("KMS {action} failed: {e}"))?;
        let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status >= 300 {
            let kind = doc["__type"].as_str().unwrap_or("").rsplit('#').next().unwrap_or("").to_string();
            let message = doc["message"].as_str().or_else(|| doc["Message"].as_str()).unwrap_or("");
            return Err(format!("KMS {action} answered HTTP {status} {kind}: {message}")
                .trim_end_matches([' ', ':'])
                .to_string());
        }
        Ok(doc)
    }
}

/// The endpoint for `key` (see the module docs).
fn endpoint(key: &KmsKey) -> String {
    let env = |k: &str| std::env::var(k).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    key.endpoint
        .clone()
        .or_else(|| env("AWS_ENDPOINT_URL_KMS"))
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .unwrap_or_else(|| format!("https://kms.{}.amazonaws.com", key.region))
}

fn bytes_of(doc: &Value, field: &str) -> Result<Vec<u8>, String> {
    let text = doc[field].as_str().ok_or_else(|| format!("the KMS answer has no {field}"))?;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("the KMS answer's {field} is not base64: {e}"))
}

fn key_bytes(plain: &[u8]) -> Result<[u8; 32], String> {
    plain.try_into().map_err(|_| format!("KMS answered a {}-byte data key, not 32", plain.len()))
}

/// Run `fut` to completion on a thread of its own (the callers may be inside a runtime).
fn block<T: Send>(fut: impl std::future::Future<Output = Result<T, String>> + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start a runtime for KMS: {e}"))?;
            rt.block_on(fut)
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

fn sign(
    creds: &aws_credential_types::Credentials,
    region: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(String, String)>, String> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    let bad = |e: String| format!("cannot sign the KMS request: {e}");
    let identity = creds.clone().into();
    let params: aws_sigv4::http_request::SigningParams<'_> = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("kms")
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| bad(e.to_string()))?
        .into();
    let request = SignableRequest::new("POST", url, headers.iter().copied(), SignableBody::Bytes(body))
        .map_err(|e| bad(e.to_string()))?;
    let (instructions, _) = sign(request, &params).map_err(|e| bad(e.to_string()))?.into_parts();
    Ok(instructions.headers().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}
