//! Every credential source of Tencent Cloud and Alibaba Cloud, through `gpuplan check`
//! against the fakes (their STS and instance-metadata endpoints in `identity.rs`): the
//! check passes with keys only that source could give (the fakes accept temporary keys
//! only with their token), says which source answered, and prints no key or token.

use std::path::Path;

use crate::chinacloud::{Fleet, Run, alibaba_fake, pool, tencent_fake};

/// What no output may contain: the fakes' long-lived secrets and every temporary one.
const SECRETS: [&str; 5] =
    [tencent_fake::SECRET_KEY, alibaba_fake::ACCESS_KEY_SECRET, "tmp-secret-", "tmp-token-", "oidc-jwt-"];

fn no_secrets(r: &Run) {
    for s in SECRETS {
        assert!(!r.stdout.contains(s) && !r.stderr.contains(s), "`{s}` printed:\n{}\n{}", r.stdout, r.stderr);
    }
}

/// The provider line of `gpuplan check`, which must have passed.
fn provider_line(r: &Run, name: &str) -> String {
    let line = r.stdout.lines().find(|l| l.contains(&format!("provider \"{name}\" ("))).expect("a provider line");
    assert!(line.starts_with("ok"), "{}\n{}", r.stdout, r.stderr);
    line.to_string()
}

fn tencent(fake: &tencent_fake::Fake, env: &[(&str, &str)]) -> Fleet {
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}",
        fake.url,
        pool("tencentcloud", &["ap-guangzhou-3"], "T4", "GN7.2XLARGE32", 1, "    spot_percent = 0")
    );
    Fleet::new(&spec, env)
}

fn alibaba(fake: &alibaba_fake::Fake, env: &[(&str, &str)]) -> Fleet {
    fake.lock().postpaid_vcpus = (0, 1000);
    let spec = format!(
        "provider \"alicloud\" {{\n  region   = \"cn-hangzhou\"\n  endpoint = \"{}\"\n  image    = \"m-gpuplan\"\n}}\n{}",
        fake.url,
        pool("alicloud", &["cn-hangzhou-h"], "T4", "ecs.gn6i-c4g1.xlarge", 1, "    spot_percent = 0")
    );
    Fleet::new(&spec, env)
}

fn write(path: &Path, text: &str) -> String {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    path.display().to_string()
}

#[test]
fn tencent_keys_from_the_environment_are_named_as_such() {
    let fake = tencent_fake::Fake::start();
    let f = tencent(
        &fake,
        &[("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY)],
    );
    let r = f.run(&["check"]).expect(0);
    assert!(
        provider_line(&r, "tencentcloud").ends_with("credentials from the environment (TENCENTCLOUD_SECRET_ID)"),
        "{}",
        r.stdout
    );
    no_secrets(&r);
}

#[test]
fn tencent_keys_come_from_the_sdk_profile_file() {
    let fake = tencent_fake::Fake::start();
    let f = tencent(&fake, &[]);
    let home = f.path().join("home");
    let ini = format!(
        "[other]\nsecret_id = nope\n\n[default]\nsecret_id = {}\nsecret_key = {}\n",
        tencent_fake::SECRET_ID,
        tencent_fake::SECRET_KEY
    );
    write(&home.join(".tencentcloud/credentials"), &ini);
    let r = f.run_env(&["check"], &[("HOME", home.to_str().unwrap())]).expect(0);
    assert!(provider_line(&r, "tencentcloud").contains("credentials from the profile file `"), "{}", r.stdout);
    assert!(r.stdout.contains(".tencentcloud/credentials` ([default])"), "{}", r.stdout);
    no_secrets(&r);

    // A file named by TENCENTCLOUD_CREDENTIALS_FILE that is missing is an error, not a
    // silent fall-through to another identity.
    let r = f.run_env(&["check"], &[("TENCENTCLOUD_CREDENTIALS_FILE", "/nonexistent/credentials")]).expect(1);
    assert!(r.stdout.contains("cannot read the profile file `/nonexistent/credentials`"), "{}", r.stdout);
}

#[test]
fn tencent_cvm_role_keys_come_from_instance_metadata_with_their_token() {
    let fake = tencent_fake::Fake::start();
    fake.lock().identity.instance_role = Some("gpuplan-node".into());
    let f = tencent(&fake, &[("GPUPLAN_TENCENTCLOUD_METADATA_ENDPOINT", &fake.url)]);
    let r = f.run(&["check"]).expect(0);
    assert!(
        provider_line(&r, "tencentcloud").ends_with("credentials from the CVM role `gpuplan-node` (instance metadata)"),
        "{}",
        r.stdout
    );
    assert_eq!(fake.lock().identity.count("metadata"), 1, "fetched once, kept while fresh");
    no_secrets(&r);
}

#[test]
fn tencent_assume_role_exchanges_the_keys_found_for_the_roles() {
    let fake = tencent_fake::Fake::start();
    let role = "qcs::cam::uin/100020512675:roleName/gpuplan-deployer";
    let env = [
        ("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID),
        ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY),
        ("TENCENTCLOUD_ASSUME_ROLE_ARN", role),
        ("TENCENTCLOUD_ASSUME_ROLE_SESSION_NAME", "ci-run-7"),
    ];
    let f = tencent(&fake, &env);
    let r = f.run(&["check"]).expect(0);
    let line = provider_line(&r, "tencentcloud");
    assert!(line.ends_with("credentials from STS AssumeRole (TENCENTCLOUD_ASSUME_ROLE_ARN) with the environment (TENCENTCLOUD_SECRET_ID)"), "{line}");
    let calls = fake.lock().identity.calls.clone();
    assert_eq!(calls, vec![("AssumeRole".to_string(), role.to_string())]);
    // The cloud calls were signed with the role's keys, not the environment's.
    assert!(!fake.calls("DescribeInstances").is_empty());
    no_secrets(&r);

    let r = f.run_env(&["check"], &[("TENCENTCLOUD_ASSUME_ROLE_SESSION_DURATION", "90000")]).expect(1);
    assert!(
        r.stdout.contains("`TENCENTCLOUD_ASSUME_ROLE_SESSION_DURATION` must be 1 to 43200 seconds"),
        "{}",
        r.stdout
    );
}

#[test]
fn tencent_oidc_federation_is_refreshed_before_expiry() {
    let fake = tencent_fake::Fake::start();
    fake.lock().identity.oidc_token = Some("oidc-jwt-7f3a".into());
    let f = tencent(&fake, &[]);
    let token = write(&f.path().join("token"), "oidc-jwt-7f3a\n");
    let env = [
        ("TKE_WEB_IDENTITY_TOKEN_FILE", token.as_str()),
        ("TKE_ROLE_ARN", "qcs::cam::uin/100020512675:roleName/tke-workload"),
        ("TKE_PROVIDER_ID", "cls-gpuplan"),
        ("TKE_REGION", "ap-guangzhou"),
    ];
    let r = f.run_env(&["check"], &env).expect(0);
    assert!(
        provider_line(&r, "tencentcloud")
            .ends_with("credentials from OIDC (TKE_WEB_IDENTITY_TOKEN_FILE, STS AssumeRoleWithWebIdentity)"),
        "{}",
        r.stdout
    );
    assert_eq!(fake.lock().identity.count("AssumeRoleWithWebIdentity"), 1, "one exchange for the whole run");
    no_secrets(&r);

    // Keys with less than the refresh margin left are exchanged again before each call.
    fake.lock().identity.ttl = Some(60);
    let before = fake.lock().identity.count("AssumeRoleWithWebIdentity");
    let calls_before = fake.lock().calls.len();
    f.run_env(&["check"], &env).expect(0);
    let exchanges = fake.lock().identity.count("AssumeRoleWithWebIdentity") - before;
    let calls = fake.lock().calls.len() - calls_before;
    assert!(calls >= 2 && exchanges == calls, "{exchanges} exchanges for {calls} calls");

    // A token file the platform has not written yet is a clear error.
    let mut env = env;
    env[0].1 = "/nonexistent/token";
    let r = f.run_env(&["check"], &env).expect(1);
    assert!(
        r.stdout.contains("cannot read the token file `/nonexistent/token` named by `TKE_WEB_IDENTITY_TOKEN_FILE`"),
        "{}",
        r.stdout
    );
}

#[test]
fn tencent_without_any_source_says_where_it_looked() {
    let fake = tencent_fake::Fake::start();
    let f = tencent(&fake, &[]);
    let r = f.run_env(&["check"], &[("HOME", f.path().to_str().unwrap())]).expect(1);
    assert!(r.stdout.contains("no credentials found (looked at"), "{}", r.stdout);
    assert!(r.stdout.contains("TENCENTCLOUD_SECRET_ID") && r.stdout.contains("CVM role"), "{}", r.stdout);
}

#[test]
fn alibaba_keys_from_the_environment_are_named_as_such() {
    let fake = alibaba_fake::Fake::start();
    let env = [
        ("ALIBABA_CLOUD_ACCESS_KEY_ID", alibaba_fake::ACCESS_KEY_ID),
        ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", alibaba_fake::ACCESS_KEY_SECRET),
    ];
    let r = alibaba(&fake, &env).run(&["check"]).expect(0);
    assert!(
        provider_line(&r, "alicloud").ends_with("credentials from the environment (ALIBABA_CLOUD_ACCESS_KEY_ID)"),
        "{}",
        r.stdout
    );
    no_secrets(&r);
}

/// `~/.aliyun/config.json` in each mode gpuplan reads, by `current` and by
/// `ALIBABA_CLOUD_PROFILE`.
#[test]
fn alibaba_cli_profiles_in_every_mode() {
    let fake = alibaba_fake::Fake::start();
    fake.lock().identity.instance_role = Some("gpuplan-ecs".into());
    let (sts_id, sts_secret, sts_token, _) = fake.lock().identity.issue("STS.cli");
    let f = alibaba(&fake, &[("GPUPLAN_ALICLOUD_METADATA_ENDPOINT", &fake.url)]);
    let home = f.path().join("home");
    let (id, secret) = (alibaba_fake::ACCESS_KEY_ID, alibaba_fake::ACCESS_KEY_SECRET);
    let config = serde_json::json!({
        "current": "ak",
        "profiles": [
            {"name": "ak", "mode": "AK", "access_key_id": id, "access_key_secret": secret},
            {"name": "sts", "mode": "StsToken", "access_key_id": sts_id, "access_key_secret": sts_secret, "sts_token": sts_token},
            {"name": "role", "mode": "RamRoleArn", "access_key_id": id, "access_key_secret": secret,
             "ram_role_arn": "acs:ram::1234567890:role/gpuplan", "ram_session_name": "ci", "expired_seconds": 900},
            {"name": "ecs", "mode": "EcsRamRole", "ram_role_name": "gpuplan-ecs"},
            {"name": "chained", "mode": "ChainableRamRoleArn", "source_profile": "ak"}
        ]
    });
    write(&home.join(".aliyun/config.json"), &config.to_string());
    let home = home.to_str().unwrap();
    let run = |profile: Option<&str>| {
        let mut env = vec![("HOME", home)];
        if let Some(p) = profile {
            env.push(("ALIBABA_CLOUD_PROFILE", p));
        }
        f.run_env(&["check"], &env)
    };
    let expected = [
        (None, "profile `ak` (AK)"),
        (Some("sts"), "profile `sts` (StsToken)"),
        (Some("role"), "STS AssumeRole with profile `role` (RamRoleArn)"),
        (Some("ecs"), "the ECS RAM role `gpuplan-ecs` (instance metadata) from profile `ecs` (EcsRamRole)"),
    ];
    for (profile, source) in expected {
        let r = run(profile).expect(0);
        let line = provider_line(&r, "alicloud");
        assert!(line.contains(&format!("credentials from {source} in `")), "{profile:?}: {line}");
        no_secrets(&r);
    }
    assert_eq!(fake.lock().identity.count("AssumeRole"), 1);
    assert_eq!(fake.lock().identity.count("metadata"), 1);

    let r = run(Some("chained")).expect(1);
    assert!(r.stdout.contains("mode `ChainableRamRoleArn` is not supported"), "{}", r.stdout);
    let r = run(Some("missing")).expect(1);
    assert!(r.stdout.contains("has no profile `missing`"), "{}", r.stdout);
}

#[test]
fn alibaba_ecs_ram_role_comes_from_metadata_with_an_imdsv2_token() {
    let fake = alibaba_fake::Fake::start();
    fake.lock().identity.instance_role = Some("gpuplan-node".into());
    let f = alibaba(&fake, &[("GPUPLAN_ALICLOUD_METADATA_ENDPOINT", &fake.url)]);
    let r = f.run_env(&["check"], &[("HOME", f.path().to_str().unwrap())]).expect(0);
    assert!(
        provider_line(&r, "alicloud").ends_with("credentials from the ECS RAM role `gpuplan-node` (instance metadata)"),
        "{}",
        r.stdout
    );
    assert_eq!(fake.lock().identity.metadata_tokens.len(), 1);
    no_secrets(&r);

    // Turned off as the SDK turns it off: nothing else is configured, so nothing answers.
    let env = [("HOME", f.path().to_str().unwrap()), ("ALIBABA_CLOUD_ECS_METADATA_DISABLED", "true")];
    let r = f.run_env(&["check"], &env).expect(1);
    assert!(r.stdout.contains("no credentials found (looked at"), "{}", r.stdout);
}

#[test]
fn alibaba_rrsa_oidc_is_refreshed_before_expiry() {
    let fake = alibaba_fake::Fake::start();
    fake.lock().identity.oidc_token = Some("oidc-jwt-9c1d".into());
    let f = alibaba(&fake, &[]);
    let token = write(&f.path().join("token"), "oidc-jwt-9c1d");
    let env = [
        ("ALIBABA_CLOUD_ROLE_ARN", "acs:ram::1234567890:role/rrsa"),
        ("ALIBABA_CLOUD_OIDC_PROVIDER_ARN", "acs:ram::1234567890:oidc-provider/ack-rrsa"),
        ("ALIBABA_CLOUD_OIDC_TOKEN_FILE", token.as_str()),
    ];
    let r = f.run_env(&["check"], &env).expect(0);
    assert!(
        provider_line(&r, "alicloud")
            .ends_with("credentials from OIDC (ALIBABA_CLOUD_OIDC_TOKEN_FILE, STS AssumeRoleWithOIDC)"),
        "{}",
        r.stdout
    );
    assert_eq!(fake.lock().identity.count("AssumeRoleWithOIDC"), 1);
    no_secrets(&r);

    fake.lock().identity.ttl = Some(60);
    let before = fake.lock().identity.count("AssumeRoleWithOIDC");
    let calls_before = fake.lock().calls.len();
    f.run_env(&["check"], &env).expect(0);
    let exchanges = fake.lock().identity.count("AssumeRoleWithOIDC") - before;
    let calls = fake.lock().calls.len() - calls_before;
    assert!(calls >= 2 && exchanges == calls, "{exchanges} exchanges for {calls} calls");

    // Two of the three RRSA variables: a half-done setup is named, not skipped.
    let r = f.run_env(&["check"], &env[..2]).expect(1);
    assert!(
        r.stdout.contains("OIDC (RRSA) is half set up: `ALIBABA_CLOUD_OIDC_TOKEN_FILE` is not set"),
        "{}",
        r.stdout
    );
}
