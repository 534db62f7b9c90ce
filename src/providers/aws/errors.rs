//! EC2 error codes → [`ErrorClass`] and a message that says what to do.
//!
//! The executor decides retries and fallbacks from the class alone (`apply::policy`), so
//! every code the EC2 reference lists for launches, quotas, throttling and auth maps to
//! one here. Codes come from "Error codes for the Amazon EC2 API" (reference A.10).

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};

use crate::providers::{ErrorClass, ProviderError};

/// The class of an EC2 error code. The account's spot quota running out
/// (`MaxSpotInstanceCountExceeded`, only ever answered to a spot request) is a spot
/// shortage like a stock-out: `mix.fallback = "on_demand"` moves the nodes to on-demand,
/// which that quota does not limit (Karpenter's "unfulfillable capacity" set does the same).
pub fn class_of(code: &str) -> ErrorClass {
    match code {
        "InsufficientInstanceCapacity"
        | "InsufficientCapacity"
        | "InsufficientHostCapacity"
        | "InsufficientFreeAddressesInSubnet"
        | "UnfulfillableCapacity"
        | "Unsupported"
        | "InsufficientCapacityOnHost"
        | "MaxSpotInstanceCountExceeded" => ErrorClass::OutOfCapacity,
        "VcpuLimitExceeded"
        | "InstanceLimitExceeded"
        | "ResourceLimitExceeded"
        | "MaxSpotFleetRequestCountExceeded"
        | "MaxFleetCountExceeded"
        | "LaunchTemplateLimitExceeded" => ErrorClass::Quota,
        "RequestLimitExceeded"
        | "Throttling"
        | "ThrottlingException"
        | "BandwidthLimitExceeded"
        | "RequestThrottled"
        | "EC2ThrottledException" => ErrorClass::Throttled,
        "ServiceUnavailable"
        | "Unavailable"
        | "InternalError"
        | "InternalFailure"
        | "ServerInternal"
        | "RequestTimeout"
        | "RequestTimeoutException" => ErrorClass::Retryable,
        "AuthFailure"
        | "UnauthorizedOperation"
        | "InvalidClientTokenId"
        | "SignatureDoesNotMatch"
        | "RequestExpired"
        | "ExpiredToken"
        | "OptInRequired"
        | "PendingVerification"
        | "Blocked"
        | "MissingAuthenticationToken" => ErrorClass::Auth,
        "SpotMaxPriceTooLow"
        | "IdempotentParameterMismatch"
        | "MissingParameter"
        | "UnsupportedOperation"
        | "DryRunOperation" => ErrorClass::Invalid,
        c if c.starts_with("Invalid") => ErrorClass::Invalid,
        _ => ErrorClass::Fatal,
    }
}

/// What to tell the user besides EC2's own message.
fn hint(code: &str) -> Option<&'static str> {
    Some(match code {
        "InsufficientInstanceCapacity" | "InsufficientCapacity" | "UnfulfillableCapacity" => {
            "EC2 has no spare capacity for these instance types in these zones right now; gpuplan falls back as `mix.fallback` says (on-demand, or wait, or fail)"
        }
        "InsufficientFreeAddressesInSubnet" => {
            "the zone's subnet has no free IP addresses; use a larger subnet in `subnets`"
        }
        "Unsupported" => "the instance type is not offered in this zone; list other zones or `instance_types`",
        "MaxSpotInstanceCountExceeded" => {
            "the account's spot vCPU quota for this instance family is used up; gpuplan falls back as `mix.fallback` says; for more spot, request an increase in Service Quotas (EC2 spot instance requests) or lower `spot_percent`"
        }
        "VcpuLimitExceeded" | "InstanceLimitExceeded" => {
            "the account's on-demand vCPU quota for this instance family (e.g. \"Running On-Demand P instances\") is used up; request an increase in Service Quotas"
        }
        "SpotMaxPriceTooLow" => {
            "`mix.max_spot_price` is below the current spot price; raise it or remove it to pay the market price"
        }
        "RequestLimitExceeded" => "EC2 throttled the account's API calls in this region; gpuplan backs off and retries",
        "AuthFailure" | "InvalidClientTokenId" | "SignatureDoesNotMatch" | "MissingAuthenticationToken" => {
            "AWS rejected the credentials: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or `profile` in the provider block"
        }
        "UnauthorizedOperation" => {
            "the credentials are valid but not allowed to make this call; grant the IAM action (decode the message with `aws sts decode-authorization-message`)"
        }
        "RequestExpired" => "the request's timestamp is off by more than 15 minutes; fix the machine's clock",
        "ExpiredToken" => "the session token expired; refresh the credentials",
        "OptInRequired" => "the account is not subscribed to EC2 in this region; opt in first",
        "IdempotentParameterMismatch" => {
            "a launch with the same idempotency token but different parameters ran before; run `gpuplan plan` again"
        }
        "InvalidAMIID.NotFound" | "InvalidAMIID.Malformed" => "the `image` AMI id does not exist in this region",
        "InvalidSubnetID.NotFound" => "a subnet in `subnets` does not exist in this region",
        "InvalidGroup.NotFound" => "a group in `security_groups` does not exist in this region",
        "InvalidKeyPair.NotFound" => "`key_name` names no key pair in this region",
        _ => return None,
    })
}

/// A provider error from an EC2 error code and message.
pub fn from_code(code: &str, message: &str) -> ProviderError {
    let mut text = if message.is_empty() { code.to_string() } else { message.to_string() };
    if let Some(h) = hint(code) {
        text = format!("{text} (hint: {h})");
    }
    ProviderError::new(class_of(code), code, text)
}

/// Classify an SDK error of call `api`. Transport faults are retryable; a missing
/// credential is an auth error; service errors go through [`from_code`].
pub fn from_sdk<E, R>(api: &str, err: SdkError<E, R>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    match &err {
        SdkError::ServiceError(se) => {
            let e = se.err();
            let code = e.code().unwrap_or("Unknown");
            let mut pe = from_code(code, e.message().unwrap_or_default());
            pe.message = format!("{api}: {}", pe.message);
            pe
        }
        SdkError::TimeoutError(_) => ProviderError::new(
            ErrorClass::Retryable,
            "Timeout",
            format!("{api}: the EC2 endpoint did not answer in time"),
        ),
        SdkError::DispatchFailure(d) => {
            let detail = chain(&err);
            if d.is_user() || detail.contains("credentials") {
                return no_credentials(api, &detail);
            }
            ProviderError::new(
                ErrorClass::Retryable,
                "ConnectionFailed",
                format!(
                    "{api}: cannot reach the EC2 endpoint: {detail} (hint: check `endpoint` in the provider block or AWS_ENDPOINT_URL)"
                ),
            )
        }
        SdkError::ConstructionFailure(_) => {
            let detail = chain(&err);
            if detail.contains("credentials") || detail.contains("identity") {
                return no_credentials(api, &detail);
            }
            ProviderError::new(ErrorClass::Fatal, "RequestInvalid", format!("{api}: {detail}"))
        }
        SdkError::ResponseError(_) => ProviderError::new(
            ErrorClass::Retryable,
            "BadResponse",
            format!("{api}: the EC2 endpoint sent a response gpuplan cannot read: {}", chain(&err)),
        ),
        _ => ProviderError::new(ErrorClass::Fatal, "Unknown", format!("{api}: {}", chain(&err))),
    }
}

/// Where the standard chain looks (`config.rs`), for a message that says what was tried.
pub const CREDENTIAL_SOURCES: &str = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the profile in ~/.aws/credentials and ~/.aws/config (static keys, role_arn, SSO), web identity (AWS_WEB_IDENTITY_TOKEN_FILE), the ECS container endpoint and instance metadata";

/// No credentials were found, so none were sent: not the cloud refusing them. The SDK's
/// own detail is kept only when it says more than "the chain found nothing".
fn no_credentials(api: &str, detail: &str) -> ProviderError {
    let nothing = ["no providers in chain provided credentials", "the credential provider was not enabled"];
    let more = if nothing.iter().any(|n| detail.contains(n)) { String::new() } else { format!(": {detail}") };
    ProviderError::new(
        ErrorClass::Auth,
        "NoCredentials",
        format!(
            "{api}: no AWS credentials found (looked in {CREDENTIAL_SOURCES}){more} (hint: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or `profile` in the provider block)"
        ),
    )
}

/// The error and its sources on one line.
fn chain(err: &dyn std::error::Error) -> String {
    let mut parts = vec![err.to_string()];
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_quota_throttle_and_auth_codes_have_their_classes() {
        assert_eq!(class_of("InsufficientInstanceCapacity"), ErrorClass::OutOfCapacity);
        // The spot quota is a spot shortage (falls back); the on-demand vCPU quota is not.
        assert_eq!(class_of("MaxSpotInstanceCountExceeded"), ErrorClass::OutOfCapacity);
        assert_eq!(class_of("VcpuLimitExceeded"), ErrorClass::Quota);
        assert_eq!(class_of("SpotMaxPriceTooLow"), ErrorClass::Invalid);
        assert_eq!(class_of("RequestLimitExceeded"), ErrorClass::Throttled);
        assert_eq!(class_of("AuthFailure"), ErrorClass::Auth);
        assert_eq!(class_of("UnauthorizedOperation"), ErrorClass::Auth);
        assert_eq!(class_of("InvalidParameterValue"), ErrorClass::Invalid);
        assert_eq!(class_of("InternalError"), ErrorClass::Retryable);
        assert_eq!(class_of("SomethingNew"), ErrorClass::Fatal);
    }

    #[test]
    fn messages_keep_ec2_text_and_add_a_hint() {
        let e = from_code("VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit");
        assert!(e.message.starts_with("You have requested more vCPU"), "{}", e.message);
        assert!(e.message.contains("Service Quotas"), "{}", e.message);
        assert_eq!(from_code("Odd", "").message, "Odd");
    }
}
