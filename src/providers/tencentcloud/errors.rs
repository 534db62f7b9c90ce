//! Tencent Cloud error codes → [`ErrorClass`], with a hint saying what to do next.

use crate::providers::{ErrorClass, ProviderError};

/// Classify an API 3.0 error code (reference B.5). The spot quotas (per type and per
/// account) are a spot shortage like a sold-out zone: `mix.fallback = "on_demand"` moves
/// the nodes to pay-as-you-go, which those quotas do not limit.
pub fn class_of(code: &str) -> ErrorClass {
    let starts = |p: &str| code == p || code.starts_with(&format!("{p}."));
    if starts("ResourceInsufficient")
        || starts("ResourcesSoldOut")
        || code == "ResourceUnavailable.InstanceType"
        || code == "InvalidParameterValue.InsufficientOffering"
        || code == "LimitExceeded.SpotQuota"
        || code == "LimitExceeded.UserSpotQuota"
    {
        ErrorClass::OutOfCapacity
    } else if starts("RequestLimitExceeded") {
        ErrorClass::Throttled
    } else if starts("AuthFailure") || starts("UnauthorizedOperation") {
        ErrorClass::Auth
    } else if (code.starts_with("LimitExceeded.") && code.ends_with("Quota"))
        || code == "InstancesQuotaLimitExceeded"
        || code == "InvalidAccount.InsufficientBalance"
    {
        ErrorClass::Quota
    } else if starts("InternalError")
        || starts("ServiceUnavailable")
        || code == "MutexOperation.TaskRunning"
        || code == "OperationDenied.InstanceOperationInProgress"
    {
        ErrorClass::Retryable
    } else if starts("InvalidParameter")
        || starts("InvalidParameterValue")
        || starts("MissingParameter")
        || starts("UnknownParameter")
        || starts("InvalidAction")
        || starts("UnsupportedOperation")
        || starts("InvalidZone")
        || starts("InvalidImageId")
        || starts("InvalidClientToken")
        || starts("LimitExceeded")
    {
        ErrorClass::Invalid
    } else {
        ErrorClass::Fatal
    }
}

fn hint(code: &str, class: ErrorClass) -> &'static str {
    match (code, class) {
        ("InvalidParameterValue.InsufficientPrice", _) => {
            "the spot bid is below the current spot price: raise `mix.max_spot_price` or remove it to bid the market price"
        }
        ("AuthFailure.SignatureExpire", _) => {
            "the request's timestamp is over 5 minutes off: check this machine's clock"
        }
        (_, ErrorClass::Auth) => {
            "check TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY (or `access_key`/`secret_key`) and the key's CAM permissions"
        }
        (_, ErrorClass::OutOfCapacity) => {
            "Tencent Cloud has no stock for this type here; the pool's `mix.fallback` decides what happens next"
        }
        (_, ErrorClass::Quota) => {
            "an account limit: raise the quota in the Tencent Cloud console or lower `nodes.desired`"
        }
        (_, ErrorClass::Throttled) => "rate limited by Tencent Cloud; gpuplan backs off and retries",
        _ => "",
    }
}

/// A provider error for a Tencent error answer, with where it happened and a hint.
pub fn api_error(what: &str, code: &str, message: &str, request_id: &str) -> ProviderError {
    let class = if code == "InvalidParameterValue.InsufficientPrice" { ErrorClass::Invalid } else { class_of(code) };
    let h = hint(code, class);
    let mut msg = format!("Tencent Cloud {what}: {message}");
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
        for (code, class) in [
            ("ResourceInsufficient.SpecifiedInstanceType", ErrorClass::OutOfCapacity),
            ("ResourceInsufficient.ZoneSoldOutForSpecifiedInstance", ErrorClass::OutOfCapacity),
            ("ResourcesSoldOut.AvailableZone", ErrorClass::OutOfCapacity),
            ("InvalidParameterValue.InsufficientOffering", ErrorClass::OutOfCapacity),
            ("LimitExceeded.SpotQuota", ErrorClass::OutOfCapacity),
            ("LimitExceeded.UserSpotQuota", ErrorClass::OutOfCapacity),
            ("LimitExceeded.InstanceQuota", ErrorClass::Quota),
            ("RequestLimitExceeded", ErrorClass::Throttled),
            ("RequestLimitExceeded.UinLimitExceeded", ErrorClass::Throttled),
            ("AuthFailure.SignatureFailure", ErrorClass::Auth),
            ("AuthFailure.SecretIdNotFound", ErrorClass::Auth),
            ("InternalError", ErrorClass::Retryable),
            ("InvalidAction", ErrorClass::Invalid),
        ] {
            assert_eq!(class_of(code), class, "{code}");
        }
        let e = api_error("RunInstances", "InvalidParameterValue.InsufficientPrice", "bid too low", "r-1");
        assert_eq!(e.class, ErrorClass::Invalid);
        assert!(e.message.contains("max_spot_price") && e.message.contains("r-1"), "{}", e.message);
    }
}
