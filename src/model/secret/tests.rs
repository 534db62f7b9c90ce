use super::*;

#[test]
fn every_source_parses_and_prints_as_written() {
    for text in [
        "aws-sm:ml/hf-token",
        "aws-sm:ml/creds#password",
        "ssm:/ml/wandb",
        "tencent-ssm:hf-token",
        "alicloud-kms:ml/hf-token",
        "k8s:hf-token/token",
        "env:WANDB_API_KEY",
    ] {
        let r = SecretRef::parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(r.to_string(), text);
        assert_eq!(r.shown(), format!("(secret: {text})"));
    }
    let r = SecretRef::parse("aws-sm:ml/creds#password").expect("parses");
    assert_eq!((r.source, r.name.as_str(), r.key.as_deref()), (SecretSource::AwsSm, "ml/creds", Some("password")));
    let k = SecretRef::parse("k8s:hf/token").expect("parses");
    assert_eq!((k.name.as_str(), k.key.as_deref()), ("hf", Some("token")));
}

#[test]
fn bad_references_say_why_and_how_to_write_them() {
    let cases = [
        ("vault:x", "`vault` is not a secret source", "the sources are"),
        ("ml/hf-token", "names no secret source", "write `SOURCE:NAME`"),
        ("ssm:ml/wandb", "not a parameter path", "write `ssm:/PATH`"),
        ("k8s:hf-token", "names no key", "write `k8s:SECRET/KEY`"),
        ("aws-sm:", "names no secret", "write `aws-sm:NAME[#KEY]`"),
        ("aws-sm:x#", "empty key", "write `aws-sm:NAME[#KEY]`"),
        ("env:1X", "not an environment variable", "write `env:NAME`"),
        ("tencent-ssm:a/b", "may not contain '/'", "write `tencent-ssm:NAME`"),
        ("k8s:Hf/token", "may not contain 'H'", "write `k8s:SECRET/KEY`"),
    ];
    for (text, why, hint) in cases {
        let e = SecretRef::parse(text).expect_err(text);
        assert!(e.why.contains(why), "{text}: {}", e.why);
        assert!(e.hint.contains(hint), "{text}: {}", e.hint);
    }
}

#[test]
fn env_values_serialize_as_text_or_a_secret_object() {
    let v: EnvValue = serde_json::from_str(r#"{"secret": "ssm:/a/b"}"#).expect("a secret");
    assert_eq!(v.shown(), "(secret: ssm:/a/b)");
    assert_eq!(serde_json::to_string(&v).expect("json"), r#"{"secret":"ssm:/a/b"}"#);
    let t: EnvValue = serde_json::from_str(r#""plain""#).expect("text");
    assert_eq!(t, EnvValue::Text("plain".into()));
    assert!(serde_json::from_str::<EnvValue>(r#"{"secret": "vault:x"}"#).is_err());
}
