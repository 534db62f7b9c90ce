//! Alibaba Cloud error codes → [`ErrorClass`], with a hint saying what to do next.

use crate::providers::{ErrorClass, ProviderError};

/// Classify an ECS / CS error code (reference C.6); `status` is the HTTP status.
pub fn class_of(code: &str, status: u16) -> ErrorClass {
    let starts = |p: &str| code == p || code.starts_with(&format!("{p}."));
    match code {
        "OperationDenied.NoStock"
        | "Zone.NotOnSale"
        | "Zone.NotOpen"
        | "InvalidResourceType.NotSupported"
        | "InvalidInstanceType.ZoneNotSupported"
        | "InstanceType.Offline"
        | "OperationDenied.ResourceControl" => return ErrorClass::OutOfCapacity,
        "InvalidAccessKeyId.NotFound"
        | "InvalidAccessKeyId.Inactive"
        | "SignatureDoesNotMatch"
        | "IncompleteSignature"
        | "InvalidSecurityToken.Expired"
        | "InvalidSecurityToken.Malformed"
        | "InvalidTimeStamp.Expired"
        | "Forbidden.RAM"
        | "Forbidden" => return ErrorClass::Auth,
        "InvalidAccountStatus.NotEnoughBalance" | "Account.Arrearage" => return ErrorClass::Quota,
        "Idempotence.Processing" | "ServiceUnavailable" | "InternalError" | "UnknownError" => {
            return ErrorClass::Retryable;
        }
        _ => {}
    }
    if starts("Throttling") {
        ErrorClass::Throttled
    } else if starts("QuotaExceed") || code == "OperationDenied.QuotaExceed" {
        ErrorClass::Quota
    } else if status >= 500 {
        ErrorClass::Retryable
    } else if (400..500).contains(&status) {
        ErrorClass::Invalid
    } else {
        ErrorClass::Fatal
    }
}

fn hint(code: &str, class: ErrorClass) -> &'static str {
    match (code, class) {
        ("InvalidSpotPriceLimit.LowerThanPublicPrice", _) => {
            "the spot price limit is below the current spot price: raise `mix.max_spot_price` or remove it to pay the market price (SpotAsPriceGo)"
        }
        ("InvalidTimeStamp.Expired", _) => {
            "the request's x-acs-date is over 15 minutes off: check this machine's clock"
        }
        (_, ErrorClass::Auth) => {
            "check ALIBABA_CLOUD_ACCESS_KEY_ID / ALIBABA_CLOUD_ACCESS_KEY_SECRET (or `access_key`/`secret_key`) and the RAM policy"
        }
        (_, ErrorClass::OutOfCapacity) => {
            "Alibaba Cloud has no stock for this type here; the pool's `mix.fallback` decides what happens next"
        }
        (_, ErrorClass::Quota) => "an account limit: raise it in Quota Center or lower `nodes.desired`",
        (_, ErrorClass::Throttled) => "rate limited by Alibaba Cloud; gpuplan backs off and retries",
        _ => "",
    }
}

pub fn api_error(what: &str, code: &str, message: &str, request_id: &str, status: u16) -> ProviderError {
    let class = class_of(code, status);
    let h = hint(code, class);
    let mut msg = format!("Alibaba Cloud {what}: {message}");
    if !request_id.is_empty() {
        msg.push_str(&format!(" (RequestId {request_id})"));
    }
    if !h.is_empty() {
        msg.push_str(&format!("\nhint: {h}"));
    }
    ProviderError::new(class, code, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_classes() {
        for (code, status, class) in [
            ("OperationDenied.NoStock", 403, ErrorClass::OutOfCapacity),
            ("Zone.NotOnSale", 400, ErrorClass::OutOfCapacity),
            ("InvalidSpotPriceLimit.LowerThanPublicPrice", 400, ErrorClass::Invalid),
            ("Throttling", 400, ErrorClass::Throttled),
            ("Throttling.User", 400, ErrorClass::Throttled),
            ("Throttling.Api", 400, ErrorClass::Throttled),
            ("InvalidAccessKeyId.NotFound", 404, ErrorClass::Auth),
            ("SignatureDoesNotMatch", 400, ErrorClass::Auth),
            ("QuotaExceed.ElasticQuota", 403, ErrorClass::Quota),
            ("InternalError", 500, ErrorClass::Retryable),
            ("InvalidAction.NotFound", 404, ErrorClass::Invalid),
        ] {
            assert_eq!(class_of(code, status), class, "{code}");
        }
        let e = api_error("RunInstances", "InvalidSpotPriceLimit.LowerThanPublicPrice", "too low", "r-9", 400);
        assert!(e.message.contains("max_spot_price") && e.message.contains("r-9"), "{}", e.message);
    }
}
