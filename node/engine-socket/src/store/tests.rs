//! The conformance battery: one script of store operations, run against the library's `InMemoryBackend`
//! (the reference) and against `SqlBackend` on SQLite and on a real PostgreSQL; every result is written
//! to a transcript and the transcripts must be identical. Two sessions share the database (a second
//! in-memory backend stands for the second session), then `delete_session_state` and the session row's
//! cascade must leave nothing behind.

use std::collections::BTreeMap;
use std::sync::Arc;

use wagate_db::{DataPool, DatabaseKind};
use wagate_loadtest::harness::pg::PgDatabase;
use whatsapp_rust::bytes::Bytes;
use whatsapp_rust::wacore::appstate::hash::HashState;
use whatsapp_rust::wacore::appstate::processor::AppStateMutationMAC;
use whatsapp_rust::wacore::store::error::StoreError;
use whatsapp_rust::wacore::store::traits::{
    AppStateSyncKey, Backend, DeviceInfo, DeviceListRecord, LidPnMappingEntry, MsgSecretEntry,
    PendingInboundKey, PendingInboundRow, ProtocolStore, SignalStore, TcTokenEntry,
};
use whatsapp_rust::wacore::store::{Device, InMemoryBackend};
use whatsapp_rust::wacore::time::now_secs;

use super::{SOCKET_TABLES, SqlBackend, delete_session_state, has_device};

const SESSION_A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const SESSION_B: &str = "bbbbbbbb-0000-4000-8000-000000000002";

/// Everything the script observed, one line per result.
#[derive(Default)]
struct Transcript(Vec<String>);

impl Transcript {
    fn rec(&mut self, label: &str, value: impl std::fmt::Debug) {
        self.0.push(format!("{label}: {value:?}"));
    }
}

fn key32(seed: u8) -> [u8; 32] {
    [seed; 32]
}

fn hash_state(version: u64, seed: u8, entries: &[(&str, u8)], fatal: bool) -> HashState {
    let mut state = HashState {
        version,
        hash: [seed; 128],
        ..HashState::default()
    };
    for (k, v) in entries {
        state.index_value_map.insert(k.to_string(), vec![*v; 3]);
    }
    state.mac_mismatch_fatal = fatal;
    state
}

/// A `HashState` in a comparable form (its map iterates in random order).
fn hash_view(state: &HashState) -> (u64, Vec<u8>, BTreeMap<String, Vec<u8>>, bool) {
    (
        state.version,
        state.hash.to_vec(),
        state
            .index_value_map
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        state.mac_mismatch_fatal,
    )
}

fn lid(lid: &str, phone: &str, at: i64, source: &str) -> LidPnMappingEntry {
    LidPnMappingEntry {
        lid: lid.to_string(),
        phone_number: phone.to_string(),
        created_at: at,
        updated_at: at + 1,
        learning_source: source.to_string(),
    }
}

fn device_list(
    user: &str,
    ids: &[u32],
    ts: i64,
    phash: Option<&str>,
    raw_id: Option<u32>,
) -> DeviceListRecord {
    DeviceListRecord {
        user: user.to_string(),
        devices: ids
            .iter()
            .map(|id| DeviceInfo::new(*id, Some(id + 10)).with_hosting(*id == 99))
            .collect(),
        timestamp: ts,
        phash: phash.map(str::to_string),
        raw_id,
    }
}

fn secret(
    chat: &str,
    sender: &str,
    id: &str,
    seed: u8,
    expires_at: i64,
    message_ts: i64,
) -> MsgSecretEntry {
    MsgSecretEntry {
        chat: Arc::from(chat),
        sender: Arc::from(sender),
        msg_id: Arc::from(id),
        secret: [seed; 32],
        expires_at,
        message_ts,
    }
}

/// The device fields that survive a store round trip, in a comparable form (`Device` has no `Debug`).
fn device_view(device: &Device) -> String {
    let json = serde_json::to_string(device).expect("device JSON");
    let props = whatsapp_rust::waproto::codec::device_props_to_vec(&device.device_props);
    format!("{json} props={props:?} profile={:?}", device.client_profile)
}

/// The main script. `s` (1 or 2) varies every value, so a second session writes different data under
/// the same keys; destructive calls (clears, expiry sweeps) run too, and must not reach the other session.
async fn script(b: &dyn Backend, t: &mut Transcript, s: u8, fixed_device: &Device) {
    let sv = i64::from(s);
    // ---- identities
    t.rec(
        "load_identity missing",
        b.load_identity("111@s.whatsapp.net").await.expect("op"),
    );
    b.put_identity("111@s.whatsapp.net", key32(s))
        .await
        .expect("op");
    b.put_identity("111:2@s.whatsapp.net", key32(s + 10))
        .await
        .expect("op");
    b.put_identity("111@s.whatsapp.net", key32(s + 20))
        .await
        .expect("op");
    t.rec(
        "load_identity",
        b.load_identity("111@s.whatsapp.net").await.expect("op"),
    );
    t.rec(
        "load_identity dev2",
        b.load_identity("111:2@s.whatsapp.net").await.expect("op"),
    );
    let batch: Vec<(Arc<str>, [u8; 32])> = vec![
        (Arc::from("333@lid"), key32(s + 30)),
        (Arc::from("111:2@s.whatsapp.net"), key32(s + 40)),
        (Arc::from("333@lid"), key32(s + 50)),
    ];
    b.put_identities_batch(&batch).await.expect("op");
    b.put_identities_batch(&[]).await.expect("op");
    t.rec(
        "identity batch 333",
        b.load_identity("333@lid").await.expect("op"),
    );
    t.rec(
        "identity batch dev2",
        b.load_identity("111:2@s.whatsapp.net").await.expect("op"),
    );
    b.delete_identity("333@lid").await.expect("op");
    b.delete_identity("never@lid").await.expect("op");
    t.rec(
        "identity deleted",
        b.load_identity("333@lid").await.expect("op"),
    );

    // ---- signal sessions
    t.rec(
        "get_session missing",
        b.get_session("222:3@s.whatsapp.net").await.expect("op"),
    );
    t.rec(
        "has_session missing",
        b.has_session("222:3@s.whatsapp.net").await.expect("op"),
    );
    b.put_session("222:3@s.whatsapp.net", &[s, 1, 2])
        .await
        .expect("op");
    b.put_session("222:3@s.whatsapp.net", &[s, 9, 9, 9])
        .await
        .expect("op");
    t.rec(
        "get_session",
        b.get_session("222:3@s.whatsapp.net").await.expect("op"),
    );
    t.rec(
        "has_session",
        b.has_session("222:3@s.whatsapp.net").await.expect("op"),
    );
    let sessions: Vec<(Arc<str>, Bytes)> = vec![
        (Arc::from("444@lid"), Bytes::from(vec![s, 4])),
        (Arc::from("222:3@s.whatsapp.net"), Bytes::from(vec![s, 5])),
        (Arc::from("444@lid"), Bytes::from(vec![s, 6])),
        (Arc::from("555:1@lid"), Bytes::new()),
    ];
    b.put_sessions_batch(&sessions).await.expect("op");
    for addr in ["444@lid", "222:3@s.whatsapp.net", "555:1@lid"] {
        t.rec(
            &format!("session batch {addr}"),
            b.get_session(addr).await.expect("op"),
        );
    }
    b.delete_session("555:1@lid").await.expect("op");
    t.rec(
        "session deleted",
        b.has_session("555:1@lid").await.expect("op"),
    );
    for user in ["111", "11", "1111", "222", "444", "555", "999"] {
        t.rec(
            &format!("has_signal_state_for_user {user}"),
            b.has_signal_state_for_user(user).await.expect("op"),
        );
    }

    // ---- one-time pre-keys
    t.rec("max prekey empty", b.get_max_prekey_id().await.expect("op"));
    b.store_prekey(1, &[s, 1], false).await.expect("op");
    b.store_prekey(7, &[s, 7], true).await.expect("op");
    b.store_prekey(1, &[s, 11], false).await.expect("op");
    let keys: Vec<(u32, Bytes)> = vec![
        (20, Bytes::from(vec![s, 20])),
        (5, Bytes::from(vec![s, 5])),
        (20, Bytes::from(vec![s, 21])),
    ];
    b.store_prekeys_batch(&keys, false).await.expect("op");
    b.store_prekeys_batch(&[], true).await.expect("op");
    t.rec("load_prekey 1", b.load_prekey(1).await.expect("op"));
    t.rec("load_prekey 20", b.load_prekey(20).await.expect("op"));
    t.rec("load_prekey missing", b.load_prekey(2).await.expect("op"));
    t.rec(
        "load_prekeys_batch",
        b.load_prekeys_batch(&[20, 99, 1, 5, 1]).await.expect("op"),
    );
    t.rec(
        "load_prekeys_batch empty",
        b.load_prekeys_batch(&[]).await.expect("op"),
    );
    t.rec("max prekey", b.get_max_prekey_id().await.expect("op"));
    b.mark_prekeys_uploaded(&[1, 77]).await.expect("op");
    b.mark_prekeys_uploaded(&[]).await.expect("op");
    t.rec(
        "mark_uploaded does not resurrect",
        b.load_prekey(77).await.expect("op"),
    );
    t.rec("marked key intact", b.load_prekey(1).await.expect("op"));
    b.remove_prekey(20).await.expect("op");
    b.remove_prekey(12345).await.expect("op");
    t.rec("removed prekey", b.load_prekey(20).await.expect("op"));
    t.rec(
        "max prekey after remove",
        b.get_max_prekey_id().await.expect("op"),
    );

    // ---- signed pre-keys
    t.rec("signed missing", b.load_signed_prekey(1).await.expect("op"));
    b.store_signed_prekey(3, &[s, 3]).await.expect("op");
    b.store_signed_prekey(1, &[s, 1]).await.expect("op");
    b.store_signed_prekey(3, &[s, 33]).await.expect("op");
    b.store_signed_prekey(9, &[s, 9]).await.expect("op");
    t.rec("signed 3", b.load_signed_prekey(3).await.expect("op"));
    let mut all = b.load_all_signed_prekeys().await.expect("op");
    all.sort();
    t.rec("signed all", all);
    b.remove_signed_prekey(9).await.expect("op");
    let mut all = b.load_all_signed_prekeys().await.expect("op");
    all.sort();
    t.rec("signed all after remove", all);

    // ---- sender keys
    t.rec(
        "sender key missing",
        b.get_sender_key("g1@g.us::u1").await.expect("op"),
    );
    b.put_sender_key("g1@g.us::u1", &[s, 1]).await.expect("op");
    b.put_sender_key("g1@g.us::u1", &[s, 2, 2])
        .await
        .expect("op");
    t.rec(
        "sender key",
        b.get_sender_key("g1@g.us::u1").await.expect("op"),
    );
    let sks: Vec<(Arc<str>, Bytes)> = vec![
        (Arc::from("g2@g.us::u1"), Bytes::from(vec![s, 3])),
        (Arc::from("g1@g.us::u1"), Bytes::from(vec![s, 4])),
        (Arc::from("g2@g.us::u1"), Bytes::from(vec![s, 5])),
        (Arc::from("g3@g.us::u9"), Bytes::from(vec![s, 6])),
    ];
    b.put_sender_keys_batch(&sks).await.expect("op");
    for addr in ["g1@g.us::u1", "g2@g.us::u1", "g3@g.us::u9"] {
        t.rec(
            &format!("sender key batch {addr}"),
            b.get_sender_key(addr).await.expect("op"),
        );
    }
    b.delete_sender_key("g3@g.us::u9").await.expect("op");
    t.rec(
        "sender key deleted",
        b.get_sender_key("g3@g.us::u9").await.expect("op"),
    );

    // ---- app-state sync keys
    t.rec(
        "sync key missing",
        b.get_sync_key(&[1])
            .await
            .expect("op")
            .map(|k| format!("{k:?}")),
    );
    t.rec(
        "latest sync key none",
        b.get_latest_sync_key_id().await.expect("op"),
    );
    let sk = |n: u8| AppStateSyncKey {
        key_data: vec![s, n],
        fingerprint: vec![n; 4],
        timestamp: 1000 + i64::from(n),
    };
    b.set_sync_key(&[1, s], sk(1)).await.expect("op");
    b.set_sync_key(&[2, s], sk(2)).await.expect("op");
    t.rec(
        "latest sync key",
        b.get_latest_sync_key_id().await.expect("op"),
    );
    b.set_sync_key(&[1, s], sk(3)).await.expect("op");
    t.rec(
        "latest sync key rewritten",
        b.get_latest_sync_key_id().await.expect("op"),
    );
    t.rec(
        "sync key 1",
        b.get_sync_key(&[1, s])
            .await
            .expect("op")
            .map(|k| format!("{k:?}")),
    );
    t.rec(
        "sync key 2",
        b.get_sync_key(&[2, s])
            .await
            .expect("op")
            .map(|k| format!("{k:?}")),
    );

    // ---- app-state versions
    t.rec(
        "version missing",
        hash_view(&b.get_version("regular").await.expect("op")),
    );
    b.set_version(
        "regular",
        hash_state(3, s, &[("aW5kZXgx", 1), ("aW5kZXgy", 2)], false),
    )
    .await
    .expect("op");
    b.set_version("critical_block", hash_state(1, s + 1, &[], true))
        .await
        .expect("op");
    t.rec(
        "version regular",
        hash_view(&b.get_version("regular").await.expect("op")),
    );
    b.set_version("regular", hash_state(4, s + 2, &[("aW5kZXgz", 3)], true))
        .await
        .expect("op");
    t.rec(
        "version regular v4",
        hash_view(&b.get_version("regular").await.expect("op")),
    );
    t.rec(
        "version critical",
        hash_view(&b.get_version("critical_block").await.expect("op")),
    );

    // ---- mutation MACs
    let mac = |i: u8, v: u8| AppStateMutationMAC {
        index_mac: vec![i; 32],
        value_mac: vec![v, s],
    };
    b.put_mutation_macs("regular", 1, &[mac(1, 10), mac(2, 20), mac(1, 11)])
        .await
        .expect("op");
    b.put_mutation_macs("critical_block", 1, &[mac(1, 30)])
        .await
        .expect("op");
    b.put_mutation_macs("regular", 2, &[]).await.expect("op");
    t.rec(
        "mac 1",
        b.get_mutation_mac("regular", &[1; 32]).await.expect("op"),
    );
    t.rec(
        "mac missing",
        b.get_mutation_mac("regular", &[9; 32]).await.expect("op"),
    );
    let macs = b
        .get_mutation_macs("regular", &[[1; 32], [2; 32], [9; 32]])
        .await
        .expect("op");
    t.rec("macs batch", macs.into_iter().collect::<BTreeMap<_, _>>());
    t.rec(
        "macs batch empty",
        b.get_mutation_macs("regular", &[]).await.expect("op").len(),
    );
    b.delete_mutation_macs("regular", &[vec![2; 32], vec![8; 32]])
        .await
        .expect("op");
    t.rec(
        "mac deleted",
        b.get_mutation_mac("regular", &[2; 32]).await.expect("op"),
    );
    b.clear_mutation_macs("regular").await.expect("op");
    t.rec(
        "mac cleared",
        b.get_mutation_mac("regular", &[1; 32]).await.expect("op"),
    );
    t.rec(
        "other collection kept",
        b.get_mutation_mac("critical_block", &[1; 32])
            .await
            .expect("op"),
    );

    // ---- sender-key device tracking
    t.rec(
        "skd empty",
        b.get_sender_key_devices("g1@g.us").await.expect("op"),
    );
    b.set_sender_key_status("g1@g.us", &[("d1:1@lid", true), ("d2:2@lid", false)])
        .await
        .expect("op");
    b.set_sender_key_status("g1@g.us", &[("d2:2@lid", s == 1)])
        .await
        .expect("op");
    b.set_sender_key_status("g2@g.us", &[("d1:1@lid", false), ("d3:3@lid", true)])
        .await
        .expect("op");
    b.set_sender_key_status("g3@g.us", &[("d4:4@lid", true)])
        .await
        .expect("op");
    b.set_sender_key_status("g3@g.us", &[]).await.expect("op");
    let sorted = |mut v: Vec<(String, bool)>| {
        v.sort();
        v
    };
    t.rec(
        "skd g1",
        sorted(b.get_sender_key_devices("g1@g.us").await.expect("op")),
    );
    b.delete_sender_key_device_rows(&["d1:1@lid", "zz@lid"])
        .await
        .expect("op");
    b.delete_sender_key_device_rows(&[]).await.expect("op");
    t.rec(
        "skd g1 after row delete",
        sorted(b.get_sender_key_devices("g1@g.us").await.expect("op")),
    );
    t.rec(
        "skd g2 after row delete",
        sorted(b.get_sender_key_devices("g2@g.us").await.expect("op")),
    );
    b.clear_sender_key_devices("g1@g.us").await.expect("op");
    t.rec(
        "skd g1 cleared",
        b.get_sender_key_devices("g1@g.us").await.expect("op"),
    );
    t.rec(
        "skd g2 kept",
        sorted(b.get_sender_key_devices("g2@g.us").await.expect("op")),
    );
    b.clear_all_sender_key_devices().await.expect("op");
    t.rec(
        "skd all cleared",
        b.get_sender_key_devices("g2@g.us").await.expect("op"),
    );
    b.set_sender_key_status("g4@g.us", &[("d5:5@lid", true)])
        .await
        .expect("op");

    // ---- LID <-> phone mappings (the phone direction follows the reference's reverse index)
    t.rec("lid missing", b.get_lid_mapping("100").await.expect("op"));
    t.rec("pn missing", b.get_pn_mapping("5511").await.expect("op"));
    b.put_lid_mapping(&lid("100", "5511", 10 * sv, "usync"))
        .await
        .expect("op");
    t.rec("lid 100", b.get_lid_mapping("100").await.expect("op"));
    t.rec("pn 5511", b.get_pn_mapping("5511").await.expect("op"));
    b.put_lid_mapping(&lid("200", "5511", 20 * sv, "peer_pn_message"))
        .await
        .expect("op");
    t.rec(
        "pn 5511 -> newest lid",
        b.get_pn_mapping("5511").await.expect("op"),
    );
    b.put_lid_mapping(&lid("200", "5522", 30 * sv, "usync"))
        .await
        .expect("op");
    t.rec(
        "pn 5511 after lid 200 moved",
        b.get_pn_mapping("5511").await.expect("op"),
    );
    t.rec("pn 5522", b.get_pn_mapping("5522").await.expect("op"));
    b.put_lid_mapping(&lid("100", "5511", 40 * sv, "usync"))
        .await
        .expect("op");
    t.rec(
        "pn 5511 rewritten",
        b.get_pn_mapping("5511").await.expect("op"),
    );
    b.put_lid_mappings(&[
        lid("300", "5533", 50, "history"),
        lid("300", "5544", 60, "history"),
        lid("400", "5544", 70, "history"),
    ])
    .await
    .expect("op");
    b.put_lid_mappings(&[]).await.expect("op");
    t.rec(
        "pn 5533 after batch",
        b.get_pn_mapping("5533").await.expect("op"),
    );
    t.rec(
        "pn 5544 after batch",
        b.get_pn_mapping("5544").await.expect("op"),
    );
    b.put_lid_mapping(&lid("100", "5544", 80, "usync"))
        .await
        .expect("op");
    t.rec(
        "pn 5511 after lid 100 moved",
        b.get_pn_mapping("5511").await.expect("op"),
    );
    t.rec(
        "pn 5544 taken by lid 100",
        b.get_pn_mapping("5544").await.expect("op"),
    );
    let mut all = b.get_all_lid_mappings().await.expect("op");
    all.sort_by(|x, y| x.lid.cmp(&y.lid));
    t.rec("all lid mappings", all);

    // ---- base keys
    t.rec(
        "base key missing",
        b.has_same_base_key("a@lid", "m1", &[1]).await.expect("op"),
    );
    b.save_base_key("a@lid", "m1", &[s, 1]).await.expect("op");
    t.rec(
        "base key same",
        b.has_same_base_key("a@lid", "m1", &[s, 1])
            .await
            .expect("op"),
    );
    t.rec(
        "base key other",
        b.has_same_base_key("a@lid", "m1", &[s, 2])
            .await
            .expect("op"),
    );
    t.rec(
        "base key other msg",
        b.has_same_base_key("a@lid", "m2", &[s, 1])
            .await
            .expect("op"),
    );
    b.save_base_key("a@lid", "m1", &[s, 2]).await.expect("op");
    t.rec(
        "base key overwritten",
        b.has_same_base_key("a@lid", "m1", &[s, 2])
            .await
            .expect("op"),
    );
    b.save_base_key("a@lid", "m3", &[s, 3]).await.expect("op");
    b.delete_base_key("a@lid", "m1").await.expect("op");
    t.rec(
        "base key deleted",
        b.has_same_base_key("a@lid", "m1", &[s, 2])
            .await
            .expect("op"),
    );

    // ---- device lists
    t.rec("devices missing", b.get_devices("5511").await.expect("op"));
    b.update_device_list(device_list(
        "5511",
        &[0, 1],
        100 * sv,
        Some("2:abc"),
        Some(7),
    ))
    .await
    .expect("op");
    t.rec("devices", b.get_devices("5511").await.expect("op"));
    b.update_device_lists(vec![
        device_list("5511", &[0, 99], 200 * sv, None, None),
        device_list("100", &[0], 300, Some("2:x"), Some(u32::MAX)),
        device_list("200", &[], 400, None, Some(0)),
    ])
    .await
    .expect("op");
    b.update_device_lists(Vec::new()).await.expect("op");
    for user in ["5511", "100", "200"] {
        t.rec(
            &format!("devices batch {user}"),
            b.get_devices(user).await.expect("op"),
        );
    }
    b.delete_devices("200").await.expect("op");
    t.rec("devices deleted", b.get_devices("200").await.expect("op"));

    // ---- group metadata
    t.rec(
        "group meta missing",
        b.get_group_metadata("g1@g.us").await.expect("op"),
    );
    b.put_group_metadata("g1@g.us", &[s, 1]).await.expect("op");
    b.put_group_metadata("g1@g.us", &[s, 2, 2])
        .await
        .expect("op");
    b.put_group_metadata("g2@g.us", &[s, 3]).await.expect("op");
    t.rec(
        "group meta",
        b.get_group_metadata("g1@g.us").await.expect("op"),
    );
    b.delete_group_metadata("g2@g.us").await.expect("op");
    t.rec(
        "group meta deleted",
        b.get_group_metadata("g2@g.us").await.expect("op"),
    );

    // ---- trusted-contact tokens
    t.rec(
        "tc missing",
        b.get_tc_token("1@lid")
            .await
            .expect("op")
            .map(|e| format!("{e:?}")),
    );
    let tc = |token: Vec<u8>, ts: i64, sender: Option<i64>| TcTokenEntry {
        token,
        token_timestamp: ts,
        sender_timestamp: sender,
    };
    b.put_tc_token("1@lid", &tc(vec![s, 1], 100, None))
        .await
        .expect("op");
    b.put_tc_token("2@lid", &tc(vec![s, 2], 100, Some(150)))
        .await
        .expect("op");
    b.touch_tc_token_sender_timestamp("1@lid", 120)
        .await
        .expect("op");
    b.touch_tc_token_sender_timestamp("2@lid", 140)
        .await
        .expect("op");
    b.touch_tc_token_sender_timestamp("3@lid", 130)
        .await
        .expect("op");
    for jid in ["1@lid", "2@lid", "3@lid"] {
        t.rec(
            &format!("tc touched {jid}"),
            b.get_tc_token(jid)
                .await
                .expect("op")
                .map(|e| format!("{e:?}")),
        );
    }
    b.store_received_tc_token("3@lid", &[s, 3], 90)
        .await
        .expect("op");
    t.rec(
        "tc placeholder replaced",
        b.get_tc_token("3@lid")
            .await
            .expect("op")
            .map(|e| format!("{e:?}")),
    );
    b.store_received_tc_token("1@lid", &[s, 9], 99)
        .await
        .expect("op");
    t.rec(
        "tc stale ignored",
        b.get_tc_token("1@lid")
            .await
            .expect("op")
            .map(|e| format!("{e:?}")),
    );
    b.store_received_tc_token("1@lid", &[s, 8], 100)
        .await
        .expect("op");
    t.rec(
        "tc same ts wins",
        b.get_tc_token("1@lid")
            .await
            .expect("op")
            .map(|e| format!("{e:?}")),
    );
    b.store_received_tc_token("4@lid", &[s, 4], 300)
        .await
        .expect("op");
    b.put_tc_token("5@lid", &tc(Vec::new(), 500, None))
        .await
        .expect("op");
    b.put_tc_token("6@lid", &tc(vec![s], 10, Some(10)))
        .await
        .expect("op");
    let mut jids = b.get_all_tc_token_jids().await.expect("op");
    jids.sort();
    t.rec("tc jids", jids);
    // Token cutoff 100, sender cutoff 140: 1, 2 and 4 live by their token; 3 (token 90, sender 130),
    // 5 (no bytes, no sender) and 6 (both 10) go.
    t.rec(
        "tc expired count",
        b.delete_expired_tc_tokens(100, 140).await.expect("op"),
    );
    let mut jids = b.get_all_tc_token_jids().await.expect("op");
    jids.sort();
    t.rec("tc jids after sweep", jids);
    b.delete_tc_token("4@lid").await.expect("op");
    t.rec(
        "tc deleted",
        b.get_tc_token("4@lid")
            .await
            .expect("op")
            .map(|e| format!("{e:?}")),
    );

    // ---- sent messages (timestamps are the library clock: only far-off cutoffs are deterministic)
    t.rec(
        "take sent missing",
        b.take_sent_message("c@s.whatsapp.net", "M1")
            .await
            .expect("op"),
    );
    b.store_sent_message("c@s.whatsapp.net", "M1", &[s, 1])
        .await
        .expect("op");
    b.store_sent_message("c@s.whatsapp.net", "M1", &[s, 2])
        .await
        .expect("op");
    b.store_sent_message("c@s.whatsapp.net", "M2", &[s, 3])
        .await
        .expect("op");
    b.store_sent_message("g@g.us", "M1", &[s, 4])
        .await
        .expect("op");
    t.rec(
        "take sent",
        b.take_sent_message("c@s.whatsapp.net", "M1")
            .await
            .expect("op"),
    );
    t.rec(
        "take sent again",
        b.take_sent_message("c@s.whatsapp.net", "M1")
            .await
            .expect("op"),
    );
    t.rec(
        "sent expired (old cutoff)",
        b.delete_expired_sent_messages(now_secs() - 3600)
            .await
            .expect("op"),
    );
    t.rec(
        "take sent other chat",
        b.take_sent_message("g@g.us", "M1").await.expect("op"),
    );
    b.store_sent_message("g@g.us", "M9", &[s, 9])
        .await
        .expect("op");
    t.rec(
        "sent expired (future cutoff)",
        b.delete_expired_sent_messages(now_secs() + 3600)
            .await
            .expect("op"),
    );
    t.rec(
        "take swept",
        b.take_sent_message("c@s.whatsapp.net", "M2")
            .await
            .expect("op"),
    );
    b.store_sent_message("c@s.whatsapp.net", "KEEP", &[s, 7])
        .await
        .expect("op");

    // ---- pending inbound buffer
    t.rec(
        "pending missing",
        b.get_pending_inbound("c", "s", "1").await.expect("op"),
    );
    b.store_pending_inbound("c", "s", "1", &[s, 1])
        .await
        .expect("op");
    b.store_pending_inbound("c", "s", "1", &[s, 2])
        .await
        .expect("op");
    b.store_pending_inbound("c", "s2", "1", &[s, 3])
        .await
        .expect("op");
    t.rec(
        "pending",
        b.get_pending_inbound("c", "s", "1").await.expect("op"),
    );
    t.rec(
        "pending other sender",
        b.get_pending_inbound("c", "s2", "1").await.expect("op"),
    );
    let rows = [
        PendingInboundRow {
            chat: "c",
            sender: "s",
            id: "2",
            message: &[s, 4],
        },
        PendingInboundRow {
            chat: "c",
            sender: "s",
            id: "3",
            message: &[s, 5],
        },
        PendingInboundRow {
            chat: "c",
            sender: "s",
            id: "2",
            message: &[s, 6],
        },
    ];
    b.store_pending_inbound_batch(&rows).await.expect("op");
    b.store_pending_inbound_batch(&[]).await.expect("op");
    t.rec(
        "pending batch 2",
        b.get_pending_inbound("c", "s", "2").await.expect("op"),
    );
    b.delete_pending_inbound_batch(&[
        PendingInboundKey {
            chat: "c",
            sender: "s",
            id: "2",
        },
        PendingInboundKey {
            chat: "c",
            sender: "s",
            id: "404",
        },
    ])
    .await
    .expect("op");
    b.delete_pending_inbound_batch(&[]).await.expect("op");
    t.rec(
        "pending batch deleted",
        b.get_pending_inbound("c", "s", "2").await.expect("op"),
    );
    t.rec(
        "pending batch kept",
        b.get_pending_inbound("c", "s", "3").await.expect("op"),
    );
    b.delete_pending_inbound("c", "s2", "1").await.expect("op");
    t.rec(
        "pending deleted",
        b.get_pending_inbound("c", "s2", "1").await.expect("op"),
    );
    t.rec(
        "pending expired (old cutoff)",
        b.delete_expired_pending_inbound(now_secs() - 3600)
            .await
            .expect("op"),
    );
    t.rec(
        "pending expired (future cutoff)",
        b.delete_expired_pending_inbound(now_secs() + 3600)
            .await
            .expect("op"),
    );
    t.rec(
        "pending swept",
        b.get_pending_inbound("c", "s", "1").await.expect("op"),
    );
    b.store_pending_inbound("c", "s", "KEEP", &[s, 8])
        .await
        .expect("op");

    // ---- message secrets
    t.rec(
        "secret missing",
        b.get_msg_secret("c", "s", "m").await.expect("op"),
    );
    b.put_msg_secret("c", "s", "m0", &[s; 32])
        .await
        .expect("op");
    t.rec(
        "secret",
        b.get_msg_secret("c", "s", "m0").await.expect("op"),
    );
    t.rec(
        "secret with ts",
        b.get_msg_secret_with_ts("c", "s", "m0").await.expect("op"),
    );
    let stored = b
        .put_msg_secrets(vec![
            secret("c", "s", "m1", s, 100, 0),
            secret("c", "s", "m2", s, 0, 50),
            secret("c", "s", "m3", s, 500, 60),
            secret("c", "s", "m4", s, 250, 70),
            secret("c", "s", "m1", s + 1, 200, 10),
        ])
        .await
        .expect("op");
    t.rec("secrets stored", stored);
    t.rec(
        "secrets stored empty",
        b.put_msg_secrets(Vec::new()).await.expect("op"),
    );
    let stored = b
        .put_msg_secrets(vec![
            secret("c", "s", "m2", s + 2, 900, 0),
            secret("c", "s", "m3", s + 3, 300, 65),
            secret("c", "s", "m0", s + 4, 150, 5),
        ])
        .await
        .expect("op");
    t.rec("secrets merged stored", stored);
    for id in ["m0", "m1", "m2", "m3", "m4"] {
        t.rec(
            &format!("secret merged {id}"),
            b.get_msg_secret_with_ts("c", "s", id).await.expect("op"),
        );
    }
    // Deadlines now: m0 0 (never), m1 200, m2 0, m3 500, m4 250; cutoff 250 takes m1 and m4.
    t.rec(
        "secrets expired",
        b.delete_expired_msg_secrets(250).await.expect("op"),
    );
    for id in ["m0", "m1", "m2", "m3", "m4"] {
        t.rec(
            &format!("secret after sweep {id}"),
            b.get_msg_secret("c", "s", id).await.expect("op").is_some(),
        );
    }

    // ---- device
    t.rec("device exists (empty)", b.exists().await.expect("op"));
    t.rec("device load (empty)", b.load().await.expect("op").is_none());
    t.rec("device create", b.create().await.expect("op"));
    t.rec("device exists after create", b.exists().await.expect("op"));
    let created = b.load().await.expect("op").expect("created device loads");
    t.rec(
        "created device is unpaired",
        (
            created.pn.is_none(),
            created.push_name.clone(),
            created.account.is_none(),
        ),
    );
    t.rec("device create again", b.create().await.expect("op"));
    let again = b.load().await.expect("op").expect("device");
    t.rec(
        "second create keeps the keys",
        again.identity_key.public_key.public_key_bytes()
            == created.identity_key.public_key.public_key_bytes()
            && again.noise_key.public_key.public_key_bytes()
                == created.noise_key.public_key.public_key_bytes(),
    );
    let mut mine = fixed_device.clone();
    mine.push_name = format!("device {s}");
    b.save(&mine).await.expect("op");
    t.rec(
        "device saved",
        device_view(&b.load().await.expect("op").expect("device")),
    );
    mine.push_name = format!("renamed {s}");
    mine.next_pre_key_id = 812 + u32::from(s);
    b.save(&mine).await.expect("op");
    t.rec(
        "device resaved",
        device_view(&b.load().await.expect("op").expect("device")),
    );
    t.rec("device create after save", b.create().await.expect("op"));
    t.rec(
        "device kept by create",
        b.load().await.expect("op").map(|d| d.push_name),
    );
}

/// Reads back what the script left for a session: run after the other session's script, it proves the
/// other session's writes and sweeps did not reach this one.
async fn readback(b: &dyn Backend, t: &mut Transcript) {
    t.rec(
        "rb identity",
        b.load_identity("111@s.whatsapp.net").await.expect("op"),
    );
    t.rec(
        "rb identity dev2",
        b.load_identity("111:2@s.whatsapp.net").await.expect("op"),
    );
    t.rec(
        "rb session",
        b.get_session("222:3@s.whatsapp.net").await.expect("op"),
    );
    t.rec(
        "rb session 444",
        b.get_session("444@lid").await.expect("op"),
    );
    t.rec(
        "rb prekeys",
        b.load_prekeys_batch(&[1, 5, 7, 20]).await.expect("op"),
    );
    t.rec("rb max prekey", b.get_max_prekey_id().await.expect("op"));
    let mut all = b.load_all_signed_prekeys().await.expect("op");
    all.sort();
    t.rec("rb signed", all);
    t.rec(
        "rb sender key",
        b.get_sender_key("g2@g.us::u1").await.expect("op"),
    );
    t.rec(
        "rb latest sync key",
        b.get_latest_sync_key_id().await.expect("op"),
    );
    t.rec(
        "rb version",
        hash_view(&b.get_version("regular").await.expect("op")),
    );
    t.rec(
        "rb mac critical",
        b.get_mutation_mac("critical_block", &[1; 32])
            .await
            .expect("op"),
    );
    t.rec(
        "rb skd",
        b.get_sender_key_devices("g4@g.us").await.expect("op"),
    );
    let mut all = b.get_all_lid_mappings().await.expect("op");
    all.sort_by(|x, y| x.lid.cmp(&y.lid));
    t.rec("rb lids", all);
    t.rec("rb pn", b.get_pn_mapping("5522").await.expect("op"));
    t.rec(
        "rb base key",
        b.has_same_base_key("a@lid", "m3", &[1, 3])
            .await
            .expect("op"),
    );
    t.rec(
        "rb base key s2",
        b.has_same_base_key("a@lid", "m3", &[2, 3])
            .await
            .expect("op"),
    );
    t.rec("rb devices", b.get_devices("5511").await.expect("op"));
    t.rec(
        "rb group meta",
        b.get_group_metadata("g1@g.us").await.expect("op"),
    );
    let mut jids = b.get_all_tc_token_jids().await.expect("op");
    jids.sort();
    t.rec("rb tc jids", jids);
    t.rec(
        "rb tc",
        b.get_tc_token("2@lid")
            .await
            .expect("op")
            .map(|e| format!("{e:?}")),
    );
    t.rec(
        "rb pending",
        b.get_pending_inbound("c", "s", "KEEP").await.expect("op"),
    );
    t.rec(
        "rb secret",
        b.get_msg_secret_with_ts("c", "s", "m3").await.expect("op"),
    );
    t.rec(
        "rb device",
        b.load().await.expect("op").map(|d| d.push_name),
    );
    t.rec(
        "rb sent",
        b.take_sent_message("c@s.whatsapp.net", "KEEP")
            .await
            .expect("op"),
    );
    b.store_sent_message("c@s.whatsapp.net", "KEEP2", &[7])
        .await
        .expect("op");
}

/// Session A's script, then session B's (same keys, other values, same sweeps), then A's readback.
async fn battery(a: &dyn Backend, b: &dyn Backend, fixed_device: &Device) -> Vec<String> {
    let mut t = Transcript::default();
    script(a, &mut t, 1, fixed_device).await;
    script(b, &mut t, 2, fixed_device).await;
    readback(a, &mut t).await;
    t.0
}

fn fixed_device() -> Device {
    let mut device = Device::new();
    device.pn = Some("15550001111@s.whatsapp.net".parse().expect("jid"));
    device.lid = Some("100000012345678@lid".parse().expect("jid"));
    device.push_name = "Alice".to_string();
    device.edge_routing_info = Some(vec![1, 2, 3]);
    device.props_hash = Some("abc".to_string());
    device.nct_salt = Some(vec![9; 16]);
    device.login_counter = 4;
    device.lid_migrated = true;
    device
}

async fn insert_session(pool: &DataPool, id: &str) {
    let now = wagate_db::now_ms();
    let sql = "INSERT INTO sessions (id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)";
    wagate_db::on_pool!(pool, |p| sqlx::query(sql)
        .bind(id)
        .bind(format!("name-{id}"))
        .bind(now)
        .execute(p)
        .await
        .map(|_| ()))
    .expect("insert session");
}

/// The `socket_*` tables the database actually has (so a table added later cannot escape the checks).
async fn socket_tables_in_db(pool: &DataPool) -> Vec<String> {
    let mut tables: Vec<String> = match pool {
        DataPool::Sqlite(p) => sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'socket\\_%' ESCAPE '\\'",
        )
        .fetch_all(p)
        .await
        .expect("tables"),
        DataPool::Postgres(p) => sqlx::query_scalar(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name LIKE 'socket\\_%' ESCAPE '\\'",
        )
        .fetch_all(p)
        .await
        .expect("tables"),
    };
    tables.sort();
    tables
}

/// Rows per socket table for one session.
async fn rows_of(pool: &DataPool, session_id: &str) -> BTreeMap<&'static str, i64> {
    let mut out = BTreeMap::new();
    for table in SOCKET_TABLES {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE session_id = $1");
        let n: i64 = wagate_db::on_pool!(pool, |p| sqlx::query_scalar(sqlx::AssertSqlSafe(
            sql.clone()
        ))
        .bind(session_id)
        .fetch_one(p)
        .await)
        .expect("count");
        out.insert(table, n);
    }
    out
}

async fn conformance(pool: DataPool) {
    insert_session(&pool, SESSION_A).await;
    insert_session(&pool, SESSION_B).await;

    let mut expected_tables: Vec<String> = SOCKET_TABLES.iter().map(|t| t.to_string()).collect();
    expected_tables.sort();
    assert_eq!(
        socket_tables_in_db(&pool).await,
        expected_tables,
        "SOCKET_TABLES lists every socket_ table"
    );

    // Usable where the library wants its backend.
    let sql_a: Arc<dyn Backend> = Arc::new(SqlBackend::new(pool.clone(), SESSION_A));
    let sql_b: Arc<dyn Backend> = Arc::new(SqlBackend::new(pool.clone(), SESSION_B));
    let mem_a = InMemoryBackend::new();
    let mem_b = InMemoryBackend::new();
    let device = fixed_device();

    let reference = battery(&mem_a, &mem_b, &device).await;
    let ours = battery(sql_a.as_ref(), sql_b.as_ref(), &device).await;
    for (i, (want, got)) in reference.iter().zip(&ours).enumerate() {
        assert_eq!(
            got, want,
            "transcript line {i} differs from the in-memory reference"
        );
    }
    assert_eq!(ours.len(), reference.len(), "transcript length");
    // The reference itself must have observed real data, or the comparison proves nothing.
    assert!(reference.len() > 200, "{} lines", reference.len());
    for line in [
        "pn 5511 after lid 200 moved: None",
        "tc expired count: 3",
        "secrets expired: 2",
        "sent expired (future cutoff): 2",
        "device create again: 2",
        "rb max prekey: 7",
    ] {
        assert!(
            reference.iter().any(|l| l == line),
            "reference transcript lacks {line:?}"
        );
    }

    // Both sessions hold state and linked credentials (the fixed device has a phone JID).
    assert!(has_device(&pool, SESSION_A).await.expect("has_device"));
    assert!(has_device(&pool, SESSION_B).await.expect("has_device"));
    for (table, n) in rows_of(&pool, SESSION_A).await {
        assert!(
            n > 0,
            "the battery left no row in {table}: it does not cover it"
        );
    }

    // delete_session_state: nothing of A survives, B is untouched.
    let b_before = rows_of(&pool, SESSION_B).await;
    delete_session_state(&pool, SESSION_A)
        .await
        .expect("delete_session_state");
    assert!(
        rows_of(&pool, SESSION_A).await.values().all(|n| *n == 0),
        "{:?}",
        rows_of(&pool, SESSION_A).await
    );
    assert_eq!(rows_of(&pool, SESSION_B).await, b_before);
    assert!(!has_device(&pool, SESSION_A).await.expect("has_device"));
    assert!(!sql_a.exists().await.expect("exists"));
    assert_eq!(sql_a.get_latest_sync_key_id().await.expect("latest"), None);
    assert_eq!(sql_a.get_max_prekey_id().await.expect("max"), 0);
    assert!(sql_a.get_all_lid_mappings().await.expect("lids").is_empty());
    delete_session_state(&pool, SESSION_A)
        .await
        .expect("idempotent");

    // Deleting the session row cascades (proves foreign keys are enforced on this pool).
    let sql = "DELETE FROM sessions WHERE id = $1";
    wagate_db::on_pool!(&pool, |p| sqlx::query(sql)
        .bind(SESSION_B)
        .execute(p)
        .await
        .map(|_| ()))
    .expect("delete session");
    assert!(
        rows_of(&pool, SESSION_B).await.values().all(|n| *n == 0),
        "cascade left rows"
    );
    // And no row can be written for a session that does not exist.
    let orphan = SqlBackend::new(pool.clone(), "no-such-session");
    assert!(
        orphan.put_session("x@lid", &[1]).await.is_err(),
        "foreign key not enforced"
    );
}

/// Expiry boundaries with controlled timestamps (the conformance script can only use far cutoffs, since
/// both backends stamp rows with the library clock). The reference keeps rows with `ts >= cutoff`.
async fn expiry_boundaries(pool: DataPool) {
    insert_session(&pool, SESSION_A).await;
    let b = SqlBackend::new(pool.clone(), SESSION_A);
    b.store_sent_message("c", "old", &[1]).await.expect("store");
    b.store_sent_message("c", "new", &[2]).await.expect("store");
    b.store_pending_inbound("c", "s", "old", &[1])
        .await
        .expect("store");
    b.store_pending_inbound("c", "s", "new", &[2])
        .await
        .expect("store");
    for sql in [
        "UPDATE socket_sent_messages SET created_at = 100 WHERE message_id = 'old'",
        "UPDATE socket_sent_messages SET created_at = 200 WHERE message_id = 'new'",
        "UPDATE socket_pending_inbound SET created_at = 100 WHERE message_id = 'old'",
        "UPDATE socket_pending_inbound SET created_at = 200 WHERE message_id = 'new'",
    ] {
        wagate_db::on_pool!(&pool, |p| sqlx::query(sql).execute(p).await.map(|_| ()))
            .expect("backdate");
    }
    assert_eq!(b.delete_expired_sent_messages(100).await.expect("sweep"), 0);
    assert_eq!(b.delete_expired_sent_messages(101).await.expect("sweep"), 1);
    assert_eq!(
        b.take_sent_message("c", "new").await.expect("take"),
        Some(vec![2])
    );
    assert_eq!(
        b.delete_expired_pending_inbound(100).await.expect("sweep"),
        0
    );
    assert_eq!(
        b.delete_expired_pending_inbound(200).await.expect("sweep"),
        1
    );
    assert_eq!(
        b.get_pending_inbound("c", "s", "new").await.expect("get"),
        Some(vec![2])
    );

    // A corrupt row surfaces as the library's validation error, not a panic or a wrong key.
    let sql = "INSERT INTO socket_identities (session_id, address, identity_key) VALUES ($1, 'bad@lid', $2)";
    wagate_db::on_pool!(&pool, |p| sqlx::query(sql)
        .bind(SESSION_A)
        .bind(vec![1u8, 2, 3])
        .execute(p)
        .await
        .map(|_| ()))
    .expect("corrupt row");
    let err = b
        .load_identity("bad@lid")
        .await
        .expect_err("3-byte identity");
    assert!(matches!(err, StoreError::Validation(_)), "{err:?}");
    assert!(err.to_string().contains("3 bytes"), "{err}");
    // An unmigrated database reports a database error naming the operation.
    let fresh = match &pool {
        DataPool::Sqlite(_) => DataPool::connect(DatabaseKind::Sqlite, "sqlite::memory:")
            .await
            .expect("memory db"),
        DataPool::Postgres(_) => return,
    };
    let err = SqlBackend::new(fresh, SESSION_A)
        .get_session("x")
        .await
        .expect_err("no table");
    assert!(matches!(err, StoreError::Database(_)), "{err:?}");
    let chain = std::error::Error::source(&err)
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        chain.contains("get_session") && chain.contains(SESSION_A),
        "{chain}"
    );
}

async fn sqlite_pool(dir: &tempfile::TempDir) -> DataPool {
    let path = dir.path().join("data.sqlite");
    let pool = DataPool::connect(DatabaseKind::Sqlite, &path.display().to_string())
        .await
        .expect("sqlite");
    pool.migrate().await.expect("migrate");
    pool
}

async fn postgres_pool(pg: &PgDatabase) -> DataPool {
    let pool = DataPool::connect(DatabaseKind::Postgres, &pg.url)
        .await
        .expect("postgres");
    pool.migrate().await.expect("migrate");
    pool
}

async fn close(pool: DataPool) {
    match pool {
        DataPool::Sqlite(p) => p.close().await,
        DataPool::Postgres(p) => p.close().await,
    }
}

#[tokio::test]
async fn conformance_on_sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    let pool = sqlite_pool(&dir).await;
    conformance(pool.clone()).await;
    close(pool).await;
}

#[tokio::test]
async fn conformance_on_postgres() {
    let pg = PgDatabase::create().expect("throwaway PostgreSQL database");
    let pool = postgres_pool(&pg).await;
    conformance(pool.clone()).await;
    close(pool).await;
}

#[tokio::test]
async fn expiry_boundaries_and_errors_on_sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    let pool = sqlite_pool(&dir).await;
    expiry_boundaries(pool.clone()).await;
    close(pool).await;
}

#[tokio::test]
async fn expiry_boundaries_and_errors_on_postgres() {
    let pg = PgDatabase::create().expect("throwaway PostgreSQL database");
    let pool = postgres_pool(&pg).await;
    expiry_boundaries(pool.clone()).await;
    close(pool).await;
}
