use super::*;

const TABLE: ErrorTable = ErrorTable {
    cloud: "Some Cloud",
    rules: &[
        (Code::Is("LimitExceeded.SpotQuota"), ErrorClass::OutOfCapacity),
        (Code::Under("Throttling"), ErrorClass::Throttled),
        (Code::Between("LimitExceeded.", "Quota"), ErrorClass::Quota),
        (Code::Under("LimitExceeded"), ErrorClass::Invalid),
    ],
    by_status: true,
    code_hints: &[("Throttling.Api", "slow down this API")],
    class_hints: &[(ErrorClass::Throttled, "backs off"), (ErrorClass::Quota, "raise the quota")],
};

#[test]
fn the_first_matching_rule_decides() {
    assert_eq!(TABLE.class_of("LimitExceeded.SpotQuota", 400), ErrorClass::OutOfCapacity);
    assert_eq!(TABLE.class_of("LimitExceeded.InstanceQuota", 400), ErrorClass::Quota);
    assert_eq!(TABLE.class_of("LimitExceeded", 400), ErrorClass::Invalid);
    assert_eq!(TABLE.class_of("LimitExceeded.Other", 400), ErrorClass::Invalid);
}

#[test]
fn under_means_the_code_or_one_below_it() {
    assert_eq!(TABLE.class_of("Throttling", 200), ErrorClass::Throttled);
    assert_eq!(TABLE.class_of("Throttling.User", 200), ErrorClass::Throttled);
    assert_eq!(TABLE.class_of("ThrottlingX", 200), ErrorClass::Fatal, "a longer word is not under it");
}

#[test]
fn unmatched_codes_fall_back_to_the_status_only_where_the_table_says() {
    assert_eq!(TABLE.class_of("Nope", 503), ErrorClass::Retryable);
    assert_eq!(TABLE.class_of("Nope", 404), ErrorClass::Invalid);
    assert_eq!(TABLE.class_of("Nope", 200), ErrorClass::Fatal);
    let strict = ErrorTable { by_status: false, ..TABLE };
    assert_eq!(strict.class_of("Nope", 503), ErrorClass::Fatal);
}

#[test]
fn api_errors_carry_the_cloud_the_request_and_the_hint() {
    let e = TABLE.api_error("RunInstances", "Throttling.Api", "too fast", "r-9", 400);
    assert_eq!(e.class, ErrorClass::Throttled);
    assert_eq!(e.message, "Some Cloud RunInstances: too fast (RequestId r-9)\nhint: slow down this API");
    let e = TABLE.api_error("RunInstances", "LimitExceeded.InstanceQuota", "full", "", 400);
    assert_eq!(e.message, "Some Cloud RunInstances: full\nhint: raise the quota");
    let e = TABLE.api_error("RunInstances", "Nope", "odd", "", 200);
    assert_eq!(e.message, "Some Cloud RunInstances: odd", "no hint line without a hint");
}
