//! Unit tests of the remote backend against moto's S3 (started by `scripts/test`).

use super::*;

/// moto's S3 (started by `scripts/test`); the test fails, never skips, without it.
fn moto() -> String {
    std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT")
        .expect("GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`, which starts moto")
}

fn config(bucket: &str) -> BackendConfig {
    let settings = [("bucket", bucket), ("key", "cas/state.json"), ("region", "us-east-1"), ("endpoint", &moto())];
    BackendConfig {
        kind: "s3".into(),
        settings: settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        span: Default::default(),
    }
}

fn make_bucket(name: &str) {
    use std::io::{Read, Write};
    let host = moto().trim_start_matches("http://").trim_end_matches('/').to_string();
    let mut s = std::net::TcpStream::connect(&host).unwrap();
    write!(s, "PUT /{name} HTTP/1.0\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.0 200") || out.starts_with("HTTP/1.1 200"), "{out}");
}

#[test]
fn a_writer_whose_lock_was_broken_cannot_overwrite_newer_state() {
    // SAFETY of the test: credentials for moto, set before any client is built.
    unsafe {
        std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
    }
    let bucket = format!("cas-{}", std::process::id());
    make_bucket(&bucket);
    let a = RemoteBackend::new(&config(&bucket), "default", None).unwrap();
    let b = RemoteBackend::new(&config(&bucket), "default", None).unwrap();

    let lock_a = a.lock("apply", Duration::ZERO).unwrap();
    assert!(a.read().unwrap().is_none());
    let mut state_a = State::new("lineage-1".into());
    a.write(&lock_a, &mut state_a).unwrap();
    assert_eq!(state_a.serial, 1);

    // A second writer cannot lock while A holds it, and names A.
    match b.lock("apply", Duration::ZERO) {
        Err(StateError::Locked { holder: Some(h), .. }) => assert_eq!(h.id, lock_a.info.id),
        other => panic!("expected Locked, got {other:?}"),
    }
    // A's lock is broken (`state unlock ID`); B takes over and writes serial 2.
    b.unlock(&lock_a.info.id).unwrap();
    let lock_b = b.lock("apply", Duration::ZERO).unwrap();
    let mut state_b = b.read().unwrap().unwrap();
    b.write(&lock_b, &mut state_b).unwrap();
    assert_eq!(state_b.serial, 2);

    // A notices the lost lock before writing...
    assert!(matches!(a.write(&lock_a, &mut state_a), Err(StateError::LockLost { .. })));
    // ...and even a write that skips that check (an apply's periodic flush) is refused by
    // the compare-and-swap on the ETag A last saw.
    match a.write_unchecked(&mut state_a) {
        Err(StateError::Stale { found_serial: 2, expected_serial: 1, .. }) => {}
        other => panic!("expected Stale, got {other:?}"),
    }
    assert_eq!(state_a.serial, 1, "the refused writer's serial does not move");
    assert_eq!(b.read().unwrap().unwrap().serial, 2, "B's state stands");
    drop(lock_a); // not A's lock any more: releasing it leaves B's alone
    assert_eq!(b.lock_info().unwrap().map(|i| i.id), Some(lock_b.info.id.clone()));
    drop(lock_b);
    assert!(b.lock_info().unwrap().is_none());
    // The store refuses overwrites, as `gpuplan init` checks.
    b.probe().unwrap();
}

fn load(text: &str) -> crate::spec::Loaded {
    let mut sources = crate::diag::Sources::default();
    sources.add("main.hcl", text);
    crate::spec::load_sources(sources, &Default::default())
}

#[test]
fn gcs_and_azurerm_stores_name_their_objects_per_workspace() {
    let gcs = load("gpuplan {\n  backend \"gcs\" {\n    bucket = \"acme\"\n    key = \"fleets/prod.json\"\n  }\n}\n");
    let b = RemoteBackend::new(gcs.spec.backend.as_ref().unwrap(), "staging", None).unwrap();
    assert_eq!(b.url(), "gs://acme/env:/staging/fleets/prod.json");
    assert_eq!(b.lock_url(), "gs://acme/env:/staging/fleets/prod.json.lock");
    let az = load(
        "gpuplan {\n  backend \"azurerm\" {\n    storage_account_name = \"acme\"\n    container_name = \"state\"\n    key = \"prod.json\"\n  }\n}\n",
    );
    let b = RemoteBackend::new(az.spec.backend.as_ref().unwrap(), "default", None).unwrap();
    assert_eq!(b.url(), "az://acme/state/prod.json");
    assert_eq!(b.mode(), LockMode::Conditional);
}

#[test]
fn the_lock_mode_is_configured_never_guessed_from_the_host_and_untrusted_stores_are_probed() {
    let cfg = |endpoint: &str, extra: &str| {
        let l = load(&format!(
            "gpuplan {{\n  backend \"s3\" {{\n    bucket = \"b\"\n    key = \"k.json\"\n{endpoint}{extra}  }}\n}}\n"
        ));
        assert!(!l.diags.has_errors(), "{:?}", l.diags.items);
        let b = RemoteBackend::new(l.spec.backend.as_ref().unwrap(), "default", None).unwrap();
        (b.mode(), b.inner.probe_before_lock)
    };
    let cos = "    endpoint = \"https://cos.ap-guangzhou.myqcloud.com\"\n";
    use LockMode::*;
    // AWS S3 documents If-None-Match and If-Match: trusted, probed by `init` only.
    assert_eq!(cfg("", ""), (Conditional, false));
    // A COS host name alone chooses nothing; an endpoint nobody vouched for is probed
    // before every lock, which refuses a store that ignores the preconditions.
    assert_eq!(cfg(cos, ""), (Conditional, true));
    assert_eq!(cfg(cos, "    lock_mode = \"conditional\"\n"), (Conditional, false));
    // COS and OSS lock with their own header; their writes have no documented
    // compare-and-swap, so the probe (a wrong version must be refused) runs every time.
    assert_eq!(cfg(cos, "    lock_mode = \"cos\"\n"), (Cos, true));
    assert_eq!(cfg("    endpoint = \"https://storage.example.com\"\n", "    lock_mode = \"oss\"\n"), (Oss, true));
}
