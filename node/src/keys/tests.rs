use super::*;
use crate::store::backends::connect_main;

const SESSION: &str = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";

async fn service() -> (KeyService, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let pool = connect_main(&dir.path().join("main.sqlite"))
        .await
        .expect("main db");
    (KeyService::load(pool).await.expect("load"), dir)
}

fn new_key(name: &str, role: Role) -> NewKey {
    NewKey {
        name: name.into(),
        role: Some(role),
        ..NewKey::default()
    }
}

#[tokio::test]
async fn a_created_key_verifies_and_a_wrong_one_does_not() {
    let (keys, _dir) = service().await;
    let (record, plaintext) = keys
        .create(new_key("reader", Role::Viewer))
        .await
        .expect("create");
    assert_eq!(
        keys.verify(&plaintext, None).map(|k| k.id.clone()),
        Ok(record.id)
    );
    assert_eq!(
        keys.verify("wag_nope", None).err(),
        Some(KeyRefusal::Invalid)
    );
    assert_ne!(record.key_hash, plaintext, "only the hash is stored");
}

#[tokio::test]
async fn revoked_and_expired_keys_are_refused() {
    let (keys, _dir) = service().await;
    keys.ensure_master(Some("m".repeat(32).as_str()))
        .await
        .expect("master");
    let (a, pa) = keys
        .create(new_key("revoked", Role::Operator))
        .await
        .expect("create");
    keys.revoke(&a.id, None).await.expect("revoke");
    assert_eq!(keys.verify(&pa, None).err(), Some(KeyRefusal::Revoked));
    // Issuing an expired key is refused, so one that ran out is written straight to the store.
    let mut expired = new_key("expired", Role::Viewer)
        .into_key("wag_expired_plaintext")
        .expect("key");
    expired.expires_at = Some(now_ms() - 1000);
    keys.change(MainCommand::CreateKey { key: expired })
        .await
        .expect("stored");
    assert_eq!(
        keys.verify("wag_expired_plaintext", None).err(),
        Some(KeyRefusal::Expired)
    );
}

#[tokio::test]
async fn a_repeat_revoke_writes_nothing() {
    let (keys, _dir) = service().await;
    keys.ensure_master(None).await.expect("master");
    let (a, _) = keys
        .create(new_key("twice", Role::Operator))
        .await
        .expect("create");
    let first = keys.revoke(&a.id, None).await.expect("revoke");
    assert!(first.is_new && !first.key.is_active);
    let again = keys.revoke(&a.id, None).await.expect("revoke again");
    assert!(!again.is_new, "already revoked");
    assert!(!again.key.is_active);
    assert_eq!(
        again.key.updated_at, first.key.updated_at,
        "no second write"
    );
    assert_eq!(
        keys.get(&a.id).await.expect("get").updated_at,
        first.key.updated_at
    );
    assert!(matches!(
        keys.revoke("no-such-key", None).await,
        Err(KeyError::NotFound)
    ));
}

#[tokio::test]
async fn the_last_usable_admin_key_cannot_be_removed_or_demoted() {
    let (keys, _dir) = service().await;
    let generated = keys.ensure_master(None).await.expect("master");
    assert!(generated.is_some(), "first boot generates an admin key");
    let master = keys.list().await.expect("list").remove(0);
    assert!(matches!(
        keys.delete(&master.id, None).await,
        Err(KeyError::LastAdmin)
    ));
    assert!(matches!(
        keys.revoke(&master.id, None).await,
        Err(KeyError::LastAdmin)
    ));
    let demote = KeyChange {
        role: Some(Role::Viewer),
        ..KeyChange::default()
    };
    assert!(matches!(
        keys.update(&master.id, demote, None).await,
        Err(KeyError::LastAdmin)
    ));
    keys.create(new_key("second-admin", Role::Admin))
        .await
        .expect("create");
    keys.delete(&master.id, None)
        .await
        .expect("delete once another admin exists");
}

#[tokio::test]
async fn malformed_allowed_sessions_are_refused() {
    let (keys, _dir) = service().await;
    for bad in [
        vec![""],
        vec![" a"],
        vec!["a,b"],
        vec![SESSION, SESSION],
        vec!["a-session-name"],
    ] {
        let new = NewKey {
            allowed_sessions: Some(bad.iter().map(|s| s.to_string()).collect()),
            ..new_key("scoped", Role::Operator)
        };
        assert!(
            matches!(keys.create(new).await, Err(KeyError::Invalid(_))),
            "{bad:?}"
        );
    }
}

#[tokio::test]
async fn allowed_session_ids_are_kept_as_requests_name_them() {
    let (keys, _dir) = service().await;
    let new = NewKey {
        allowed_sessions: Some(vec![
            "3F2504E0-4F89-41D3-9A0C-0305E82C3301".to_string(),
            "{2f1d6c0e-0000-4000-8000-000000000001}".to_string(),
        ]),
        ..new_key("scoped", Role::Operator)
    };
    let (key, _) = keys.create(new).await.expect("created");
    assert_eq!(
        key.allowed_sessions.as_deref(),
        Some(
            &[
                SESSION.to_string(),
                "2f1d6c0e-0000-4000-8000-000000000001".to_string()
            ][..]
        )
    );
    // The same id in two spellings is one entry twice.
    let twice = NewKey {
        allowed_sessions: Some(vec![
            "3F2504E0-4F89-41D3-9A0C-0305E82C3301".to_string(),
            "3f2504e0-4f89-41d3-9a0c-0305e82c3301".to_string(),
        ]),
        ..new_key("twice", Role::Operator)
    };
    assert!(matches!(
        keys.create(twice).await,
        Err(KeyError::Invalid(_))
    ));
}

#[test]
fn ip_rules_match_addresses_and_ranges() {
    let allowed = vec!["10.0.0.0/8".to_string(), "127.0.0.1".to_string()];
    assert!(rules::ip_allowed(&allowed, "10.1.2.3".parse().ok()));
    assert!(rules::ip_allowed(&allowed, "::ffff:127.0.0.1".parse().ok()));
    assert!(!rules::ip_allowed(&allowed, "192.168.1.1".parse().ok()));
    assert!(!rules::ip_allowed(&allowed, None));
}

#[tokio::test]
async fn every_field_that_locks_the_last_admin_out_is_refused() {
    let (keys, _dir) = service().await;
    keys.ensure_master(None).await.expect("master");
    let master = keys.list().await.expect("list").remove(0);
    let lockouts = [
        KeyChange {
            allowed_ips: Some(Some(vec![])),
            ..KeyChange::default()
        },
        KeyChange {
            allowed_sessions: Some(Some(vec![SESSION.into()])),
            ..KeyChange::default()
        },
        KeyChange {
            allowed_ips: Some(Some(vec!["10.9.9.9".into()])),
            ..KeyChange::default()
        },
        KeyChange {
            is_active: Some(false),
            ..KeyChange::default()
        },
        KeyChange {
            role: Some(Role::Operator),
            ..KeyChange::default()
        },
    ];
    for change in lockouts {
        let label = format!("{change:?}");
        assert!(
            matches!(
                keys.update(&master.id, change, local()).await,
                Err(KeyError::LastAdmin)
            ),
            "{label}"
        );
    }
    let narrowed_but_usable = KeyChange {
        allowed_ips: Some(Some(vec!["127.0.0.1".into()])),
        ..KeyChange::default()
    };
    keys.update(&master.id, narrowed_but_usable, local())
        .await
        .expect("an address list that admits the caller is still usable");
}

#[tokio::test]
async fn a_boot_with_the_master_key_restores_it_to_an_unrestricted_admin() {
    let (keys, _dir) = service().await;
    let master = "m".repeat(32);
    keys.ensure_master(Some(&master)).await.expect("master");
    let record = keys.verify(&master, None).expect("master verifies");
    keys.create(new_key("other-admin", Role::Admin))
        .await
        .expect("second admin");
    let lock_out = KeyChange {
        allowed_ips: Some(Some(vec![])),
        role: Some(Role::Viewer),
        allowed_sessions: Some(Some(vec![SESSION.into()])),
        ..KeyChange::default()
    };
    keys.update(&record.id, lock_out, None)
        .await
        .expect("allowed while another admin exists");
    assert_eq!(
        keys.verify(&master, None).err(),
        Some(KeyRefusal::AddressNotAllowed)
    );
    keys.ensure_master(Some(&master)).await.expect("reboot");
    let restored = keys.verify(&master, None).expect("master works again");
    assert_eq!(restored.role, Role::Admin);
    assert!(restored.allowed_ips.is_none() && restored.allowed_sessions.is_none());
}

#[tokio::test]
async fn control_characters_in_key_names_are_refused() {
    let (keys, _dir) = service().await;
    for bad in [
        "ab\0c",
        "line\nbreak",
        "tab\there",
        "esc\u{1b}[31m",
        "del\u{7f}x",
    ] {
        assert!(
            matches!(
                keys.create(new_key(bad, Role::Viewer)).await,
                Err(KeyError::Invalid(_))
            ),
            "{bad:?}"
        );
    }
}

fn local() -> Option<IpAddr> {
    "127.0.0.1".parse().ok()
}

#[tokio::test]
async fn an_admin_key_usable_only_from_elsewhere_does_not_count_for_the_caller() {
    let (keys, _dir) = service().await;
    keys.ensure_master(None).await.expect("master");
    let master = keys.list().await.expect("list").remove(0);
    let (second, _) = keys
        .create(NewKey {
            allowed_ips: Some(vec!["10.0.0.0/8".into()]),
            ..new_key("remote-admin", Role::Admin)
        })
        .await
        .expect("second admin");
    assert!(matches!(
        keys.delete(&master.id, local()).await,
        Err(KeyError::LastAdmin)
    ));
    let narrow = || KeyChange {
        allowed_ips: Some(Some(vec!["10.9.9.9".into()])),
        ..KeyChange::default()
    };
    assert!(matches!(
        keys.update(&master.id, narrow(), local()).await,
        Err(KeyError::LastAdmin)
    ));
    // From inside the range the second admin is usable, so the master key may go.
    let inside = "10.1.2.3".parse().ok();
    keys.update(&master.id, narrow(), inside)
        .await
        .expect("the caller keeps the second admin");
    assert!(matches!(
        keys.revoke(&second.id, inside).await,
        Err(KeyError::LastAdmin)
    ));
}

#[tokio::test]
async fn an_expiry_in_the_past_is_refused_at_creation_and_update() {
    let (keys, _dir) = service().await;
    keys.ensure_master(None).await.expect("master");
    let past = NewKey {
        expires_at: Some(now_ms() - 1),
        ..new_key("already-expired", Role::Viewer)
    };
    assert!(matches!(keys.create(past).await, Err(KeyError::Invalid(_))));
    let (key, _) = keys
        .create(new_key("expires-later", Role::Viewer))
        .await
        .expect("create");
    let change = KeyChange {
        expires_at: Some(Some(now_ms() - 1)),
        ..KeyChange::default()
    };
    assert!(matches!(
        keys.update(&key.id, change, local()).await,
        Err(KeyError::Invalid(_))
    ));
    let clear = KeyChange {
        expires_at: Some(None),
        ..KeyChange::default()
    };
    keys.update(&key.id, clear, local())
        .await
        .expect("clearing an expiry is fine");
}

#[test]
fn a_logged_key_change_without_a_caller_address_still_reads() {
    let old: MainCommand =
        serde_json::from_str(r#"{"op":"deleteKey","id":"k","now":1}"#).expect("old entry");
    assert_eq!(
        old,
        MainCommand::DeleteKey {
            id: "k".into(),
            now: 1,
            caller: None
        }
    );
    let new = MainCommand::DeleteKey {
        id: "k".into(),
        now: 1,
        caller: local(),
    };
    let text = serde_json::to_string(&new).expect("json");
    assert_eq!(serde_json::from_str::<MainCommand>(&text).ok(), Some(new));
}
