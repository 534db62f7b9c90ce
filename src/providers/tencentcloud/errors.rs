//! Tencent Cloud error codes → [`ErrorClass`], with a hint saying what to do next: the
//! cloud's table, read by the shared `signed_json::errors`.

use crate::providers::signed_json::errors::{Code, ErrorTable};
use crate::providers::{ErrorClass, ProviderError};

/// API 3.0 error codes (reference B.5), first match first. The spot quotas (per type and
/// per account) are a spot shortage like a sold-out zone: `mix.fallback = "on_demand"`
/// moves the nodes to pay-as-you-go, which those quotas do not limit.
pub const TABLE: ErrorTable = ErrorTable {
    cloud: "Tencent Cloud",
    rules: &[
        (Code::Under("ResourceInsufficient"), ErrorClass::OutOfCapacity),
        (Code::Under("ResourcesSoldOut"), ErrorClass::OutOfCapacity),
        (Code::Is("ResourceUnavailable.InstanceType"), ErrorClass::OutOfCapacity),
        (Code::Is("InvalidParameterValue.InsufficientOffering"), ErrorClass::OutOfCapacity),
        (Code::Is("LimitExceeded.SpotQuota"), ErrorClass::OutOfCapacity),
        (Code::Is("LimitExceeded.UserSpotQuota"), ErrorClass::OutOfCapacity),
        (Code::Under("RequestLimitExceeded"), ErrorClass::Throttled),
        (Code::Under("AuthFailure"), ErrorClass::Auth),
        (Code::Under("UnauthorizedOperation"), ErrorClass::Auth),
        (Code::Between("LimitExceeded.", "Quota"), ErrorClass::Quota),
        (Code::Is("InstancesQuotaLimitExceeded"), ErrorClass::Quota),
        (Code::Is("InvalidAccount.InsufficientBalance"), ErrorClass::Quota),
        (Code::Under("InternalError"), ErrorClass::Retryable),
        (Code::Under("ServiceUnavailable"), ErrorClass::Retryable),
        (Code::Is("MutexOperation.TaskRunning"), ErrorClass::Retryable),
        (Code::Is("OperationDenied.InstanceOperationInProgress"), ErrorClass::Retryable),
        // The spot bid below the market (`InvalidParameterValue.InsufficientPrice`) is
        // refused as invalid: a higher bid, not another zone, fixes it.
        (Code::Under("InvalidParameter"), ErrorClass::Invalid),
        (Code::Under("InvalidParameterValue"), ErrorClass::Invalid),
        (Code::Under("MissingParameter"), ErrorClass::Invalid),
        (Code::Under("UnknownParameter"), ErrorClass::Invalid),
        (Code::Under("InvalidAction"), ErrorClass::Invalid),
        (Code::Under("UnsupportedOperation"), ErrorClass::Invalid),
        (Code::Under("InvalidZone"), ErrorClass::Invalid),
        (Code::Under("InvalidImageId"), ErrorClass::Invalid),
        (Code::Under("InvalidClientToken"), ErrorClass::Invalid),
        (Code::Under("LimitExceeded"), ErrorClass::Invalid),
    ],
    // API 3.0 answers errors with HTTP 200: only the code says anything.
    by_status: false,
    code_hints: &[
        (
            "InvalidParameterValue.InsufficientPrice",
            "the spot bid is below the current spot price: raise `mix.max_spot_price` or remove it to bid the market price",
        ),
        ("AuthFailure.SignatureExpire", "the request's timestamp is over 5 minutes off: check this machine's clock"),
    ],
    class_hints: &[
        (
            ErrorClass::Auth,
            "check TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY (or `access_key`/`secret_key`) and the key's CAM permissions",
        ),
        (
            ErrorClass::OutOfCapacity,
            "Tencent Cloud has no stock for this type here; the pool's `mix.fallback` decides what happens next",
        ),
        (ErrorClass::Quota, "an account limit: raise the quota in the Tencent Cloud console or lower `nodes.desired`"),
        (ErrorClass::Throttled, "rate limited by Tencent Cloud; gpuplan backs off and retries"),
    ],
};

/// Classify an API 3.0 error code ([`TABLE`]).
pub fn class_of(code: &str) -> ErrorClass {
    TABLE.class_of(code, 200)
}

/// A provider error for a Tencent error answer, with where it happened and a hint.
pub fn api_error(what: &str, code: &str, message: &str, request_id: &str) -> ProviderError {
    TABLE.api_error(what, code, message, request_id, 200)
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
