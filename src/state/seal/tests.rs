//! Sealing and opening: round trips, a wrong or missing key, an edited header, the
//! fallback during a rotation, and one key derivation per process and salt.

use super::*;
use crate::model::encryption::{EncryptionConfig, KeyProviderConfig};

/// A passphrase variable of this test's own (tests run in one process, on threads).
fn passphrase(var: &str, value: &str) -> KeyProviderConfig {
    // SAFETY (edition 2024): each test sets only variables named after itself, which
    // nothing else in the process reads.
    unsafe { std::env::set_var(var, value) };
    KeyProviderConfig::Passphrase { passphrase_env: var.to_string() }
}

fn ring(primary: KeyProviderConfig, fallback: Option<KeyProviderConfig>) -> Keyring {
    Keyring::new(Some(EncryptionConfig { key_provider: primary, fallback }), None)
}

fn head() -> Head {
    Head { format_version: Some(2), serial: Some(7), lineage: Some("lin-1".into()) }
}

#[test]
fn a_sealed_file_names_its_method_and_provider_and_hides_the_text() {
    let keys = ring(passphrase("SEAL_T1", "correct horse"), None);
    let text = br#"{"resources":{"gpu_pool.train":{"nodes":["i-0abc123"]}},"tags":{"team":"vision"}}"#;
    let sealed = seal(text, "state", head(), &keys).unwrap();
    let shown = String::from_utf8(sealed.clone()).unwrap();
    assert!(shown.starts_with(r#"{"encoding":"gzip+aes-256-gcm+base64","format_version":2,"serial":7,"lineage":"lin-1","key_provider":{"passphrase":{"passphrase_env":"SEAL_T1","kdf":"pbkdf2-sha512","iterations":600000,"salt":""#), "{shown}");
    for secret in ["i-0abc123", "vision", "correct horse"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(is_sealed(&sealed));
    assert_eq!(header(&sealed).unwrap().serial, Some(7));
    assert_eq!(open(&sealed, &keys).unwrap(), text);
}

#[test]
fn a_wrong_or_missing_passphrase_is_named_and_never_a_garbled_text() {
    let keys = ring(passphrase("SEAL_T2", "right"), None);
    let sealed = seal(b"{}", "state", head(), &keys).unwrap();
    // Another variable is tried (a passphrase is a passphrase) and does not open it.
    let wrong = ring(passphrase("SEAL_T2B", "wrong"), None);
    let e = open(&sealed, &wrong).unwrap_err();
    assert_eq!(
        (e.provider.as_str(), e.reason.as_str()),
        ("passphrase (SEAL_T2B)", "the passphrase in SEAL_T2B does not open it")
    );
    // A key provider of another kind is never tried.
    let kms = ring(
        KeyProviderConfig::AwsKms(crate::model::encryption::KmsKey {
            key_id: "k".into(),
            region: "r".into(),
            endpoint: None,
        }),
        None,
    );
    let e = open(&sealed, &kms).unwrap_err();
    assert_eq!(e.provider, "passphrase (SEAL_T2)");
    assert!(e.reason.contains("neither"), "{e:?}");
    unsafe { std::env::set_var("SEAL_T2", "changed") };
    let e = open(&sealed, &keys).unwrap_err();
    assert_eq!(
        (e.provider.as_str(), e.reason.as_str()),
        ("passphrase (SEAL_T2)", "the passphrase in SEAL_T2 does not open it")
    );
    unsafe { std::env::remove_var("SEAL_T2") };
    let e = open(&sealed, &keys).unwrap_err();
    assert_eq!(e.reason, "SEAL_T2 is not set");
    let e = open(&sealed, &Keyring::default()).unwrap_err();
    assert!(e.hint.contains("state rekey --decrypt"), "{e:?}");
}

#[test]
fn an_edited_header_does_not_open() {
    let keys = ring(passphrase("SEAL_T3", "p"), None);
    let sealed = String::from_utf8(seal(b"{}", "state", head(), &keys).unwrap()).unwrap();
    let edited = sealed.replace("\"serial\":7", "\"serial\":9");
    assert!(open(edited.as_bytes(), &keys).unwrap_err().reason.contains("does not open"));
}

#[test]
fn the_fallback_opens_what_the_old_key_sealed_and_new_files_use_the_new_key() {
    let old = passphrase("SEAL_T4_OLD", "old secret");
    let sealed = seal(b"{\"a\":1}", "state", head(), &ring(old.clone(), None)).unwrap();
    let rotated = ring(passphrase("SEAL_T4_NEW", "new secret"), Some(old.clone()));
    // The new key provider is a passphrase too: it is tried first, then the fallback.
    assert_eq!(open(&sealed, &rotated).unwrap(), b"{\"a\":1}");
    let resealed = seal(b"{\"a\":1}", "state", head(), &rotated).unwrap();
    assert!(String::from_utf8_lossy(&resealed).contains("SEAL_T4_NEW"));
    assert!(open(&resealed, &ring(old, None)).is_err(), "the old key no longer opens it");
}

#[test]
fn the_passphrase_is_stretched_once_per_salt() {
    let keys = ring(passphrase("SEAL_T5", "p5"), None);
    let a = seal(b"1", "state", head(), &keys).unwrap();
    let b = seal(b"2", "plan", Head::default(), &keys).unwrap();
    // The same write key (same salt) for both files of this process, random nonces apart.
    assert_eq!(header(&a).unwrap().key_provider, header(&b).unwrap().key_provider);
    assert_ne!(a, b);
    let fresh = keys.fresh();
    let c = seal(b"3", "state", head(), &fresh).unwrap();
    let d = seal(b"4", "state", head(), &fresh).unwrap();
    assert_ne!(header(&a).unwrap().key_provider, header(&c).unwrap().key_provider, "rekey takes a new salt");
    assert_eq!(header(&c).unwrap().key_provider, header(&d).unwrap().key_provider, "once");
    assert_eq!(open(&a, &keys).unwrap(), b"1");
}

#[test]
fn files_are_read_by_their_headers_without_a_spec() {
    let sealed = seal(b"x", "plan", Head::default(), &ring(passphrase("SEAL_T6", "p6"), None)).unwrap();
    assert!(String::from_utf8_lossy(&sealed).contains("\"plan\":\""));
    assert_eq!(open(&sealed, &Keyring::from_headers(None)).unwrap(), b"x");
}

/// A crashed apply's journal on a sealed local state: no node id in the state, backup or
/// journal; the journal replays with the key, is refused with a wrong one (never read as
/// a torn tail), and a torn sealed line is still only a torn tail.
#[test]
fn a_sealed_journal_hides_its_entries_replays_and_refuses_a_wrong_key() {
    use crate::state::{JournalEntry, LocalBackend, State, StateError, apply_entry};
    let dir = tempfile::tempdir().unwrap();
    let keys = ring(passphrase("SEAL_T7", "journal pass"), None);
    let b = LocalBackend::new(dir.path().join("state/default.json")).with_keys(keys);
    let lock = b.lock("test", std::time::Duration::ZERO).unwrap();
    let node = |id: &str| crate::model::Node {
        provider: None,
        id: id.into(),
        pool: "gpu_pool.a".parse().unwrap(),
        instance_type: "g6.xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: crate::model::Capacity::OnDemand,
        state: crate::model::NodeState::Running,
        image: None,
        tags: crate::model::Tags::new(),
    };
    let add = |id: &str| JournalEntry::AddNodes { address: "gpu_pool.a".into(), nodes: vec![node(id)] };
    let mut state = State::new("lineage-s".into());
    apply_entry(&mut state, &add("i-first-4e1"));
    b.write(&lock, &mut state).unwrap();
    b.write(&lock, &mut state).unwrap();
    let mut journal = b.open_journal(&lock, &state).unwrap();
    journal.append(&[add("i-second-77a")]).unwrap();
    journal.append(&[add("i-third-0c9")]).unwrap();
    drop(journal);
    for path in [b.path().to_path_buf(), b.backup_path(), b.journal_path()] {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("i-first") && !text.contains("i-second") && !text.contains("i-third"),
            "{}: {text}",
            path.display()
        );
        assert!(text.contains("SEAL_T7"), "{}", path.display());
    }
    let ids = |s: &State| s.resources["gpu_pool.a"].nodes.iter().map(|n| n.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&b.read().unwrap().unwrap()), ["i-first-4e1", "i-second-77a", "i-third-0c9"]);

    // A torn, half-written sealed line at the end is dropped, as a plain one is.
    let full = std::fs::read(b.journal_path()).unwrap();
    let mut torn = full.clone();
    torn.extend_from_slice(&full[full.len() - 30..full.len() - 1]);
    std::fs::write(b.journal_path(), &torn).unwrap();
    assert_eq!(ids(&b.read().unwrap().unwrap()).len(), 3);
    std::fs::write(b.journal_path(), &full).unwrap();

    let wrong = LocalBackend::new(b.path())
        .with_keys(ring(passphrase("SEAL_T7_WRONG", "x"), Some(passphrase("SEAL_T7", "nope"))));
    let before = std::fs::read(b.path()).unwrap();
    let e = wrong.read().unwrap_err();
    assert!(matches!(&e, StateError::Decrypt { provider, .. } if provider.contains("SEAL_T7")), "{e}");
    drop(lock);
    let lock = wrong.lock("test", std::time::Duration::ZERO).unwrap();
    assert!(matches!(wrong.recover(&lock), Err(StateError::Decrypt { .. })));
    assert_eq!(std::fs::read(b.path()).unwrap(), before, "nothing written");
    assert_eq!(std::fs::read(b.journal_path()).unwrap(), full, "the journal kept");
}
