//! Alibaba Cloud error codes → [`ErrorClass`], with a hint saying what to do next: the
//! cloud's table, read by the shared `signed_json::errors`.

use crate::providers::signed_json::errors::{Code, ErrorTable};
use crate::providers::{ErrorClass, ProviderError};

/// ECS / CS error codes (reference C.6), first match first; other codes by HTTP status.
pub const TABLE: ErrorTable = ErrorTable {
    cloud: "Alibaba Cloud",
    rules: &[
        (Code::Is("OperationDenied.NoStock"), ErrorClass::OutOfCapacity),
        (Code::Is("Zone.NotOnSale"), ErrorClass::OutOfCapacity),
        (Code::Is("Zone.NotOpen"), ErrorClass::OutOfCapacity),
        (Code::Is("InvalidResourceType.NotSupported"), ErrorClass::OutOfCapacity),
        (Code::Is("InvalidInstanceType.ZoneNotSupported"), ErrorClass::OutOfCapacity),
        (Code::Is("InstanceType.Offline"), ErrorClass::OutOfCapacity),
        (Code::Is("OperationDenied.ResourceControl"), ErrorClass::OutOfCapacity),
        (Code::Is("InvalidAccessKeyId.NotFound"), ErrorClass::Auth),
        (Code::Is("InvalidAccessKeyId.Inactive"), ErrorClass::Auth),
        (Code::Is("SignatureDoesNotMatch"), ErrorClass::Auth),
        (Code::Is("IncompleteSignature"), ErrorClass::Auth),
        (Code::Is("InvalidSecurityToken.Expired"), ErrorClass::Auth),
        (Code::Is("InvalidSecurityToken.Malformed"), ErrorClass::Auth),
        (Code::Is("InvalidTimeStamp.Expired"), ErrorClass::Auth),
        (Code::Is("Forbidden.RAM"), ErrorClass::Auth),
        (Code::Is("Forbidden"), ErrorClass::Auth),
        (Code::Is("InvalidAccountStatus.NotEnoughBalance"), ErrorClass::Quota),
        (Code::Is("Account.Arrearage"), ErrorClass::Quota),
        (Code::Is("Idempotence.Processing"), ErrorClass::Retryable),
        (Code::Is("ServiceUnavailable"), ErrorClass::Retryable),
        (Code::Is("InternalError"), ErrorClass::Retryable),
        (Code::Is("UnknownError"), ErrorClass::Retryable),
        (Code::Under("Throttling"), ErrorClass::Throttled),
        (Code::Under("QuotaExceed"), ErrorClass::Quota),
        (Code::Is("OperationDenied.QuotaExceed"), ErrorClass::Quota),
    ],
    by_status: true,
    code_hints: &[
        (
            "InvalidSpotPriceLimit.LowerThanPublicPrice",
            "the spot price limit is below the current spot price: raise `mix.max_spot_price` or remove it to pay the market price (SpotAsPriceGo)",
        ),
        ("InvalidTimeStamp.Expired", "the request's x-acs-date is over 15 minutes off: check this machine's clock"),
    ],
    class_hints: &[
        (
            ErrorClass::Auth,
            "check ALIBABA_CLOUD_ACCESS_KEY_ID / ALIBABA_CLOUD_ACCESS_KEY_SECRET (or `access_key`/`secret_key`) and the RAM policy",
        ),
        (
            ErrorClass::OutOfCapacity,
            "Alibaba Cloud has no stock for this type here; the pool's `mix.fallback` decides what happens next",
        ),
        (ErrorClass::Quota, "an account limit: raise it in Quota Center or lower `nodes.desired`"),
        (ErrorClass::Throttled, "rate limited by Alibaba Cloud; gpuplan backs off and retries"),
    ],
};

/// Classify an ECS / CS error code ([`TABLE`]); `status` is the HTTP status.
pub fn class_of(code: &str, status: u16) -> ErrorClass {
    TABLE.class_of(code, status)
}

pub fn api_error(what: &str, code: &str, message: &str, request_id: &str, status: u16) -> ProviderError {
    TABLE.api_error(what, code, message, request_id, status)
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
