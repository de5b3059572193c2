use std::collections::HashMap;

use super::*;

fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(move |k| map.get(k).cloned())
}

fn refused_var(pairs: &[(&str, &str)]) -> String {
    match load(pairs) {
        Err(e) => e.var,
        Ok(_) => "accepted".to_owned(),
    }
}

#[test]
fn defaults_match_the_spec() {
    let c = load(&[]).expect("defaults load");
    assert_eq!(c.api_port, 2785);
    assert_eq!(c.engine_type, EngineType::Browser);
    assert_eq!(c.body_size_limit, 25 * 1024 * 1024);
    assert_eq!(c.media_download_max_bytes, 50 * 1024 * 1024);
    assert_eq!(c.webhook_max_payload_bytes, 1024 * 1024);
    assert_eq!(c.webhook_timeout_ms, 10_000);
    assert_eq!(c.webhook_retry_delay_ms, 5_000);
    assert_eq!(c.audit_retention_days, 90);
    assert_eq!(
        c.rate_tiers[0],
        RateTier {
            ttl_ms: 1000,
            limit: 10
        }
    );
    assert!(!c.redis_enabled);
    assert_eq!(
        c.socket_ws_url,
        wagate_engine_socket::transport::Endpoint::parse(
            wagate_engine_socket::transport::DEFAULT_WS_URL
        )
        .expect("default endpoint"),
        "one default for the socket endpoint"
    );
    assert_eq!(
        c.webhook_settings(),
        wagate_workers::WebhookSettings {
            claimer: c.node_id.clone(),
            ..wagate_workers::WebhookSettings::default()
        },
        "one default for the webhook knobs; claims are made under the node's id"
    );
}

#[test]
fn numbers_in_exponent_hex_or_with_units_are_refused() {
    assert_eq!(
        refused_var(&[("WEBHOOK_TIMEOUT", "1e4")]),
        "WEBHOOK_TIMEOUT"
    );
    assert_eq!(refused_var(&[("API_PORT", "0x10")]), "API_PORT");
    assert_eq!(
        refused_var(&[("MEDIA_DOWNLOAD_MAX_BYTES", "50mb")]),
        "MEDIA_DOWNLOAD_MAX_BYTES"
    );
    assert_eq!(
        refused_var(&[("MEDIA_DOWNLOAD_MAX_BYTES", "5e7")]),
        "MEDIA_DOWNLOAD_MAX_BYTES"
    );
}

#[test]
fn enumerated_values_are_checked() {
    assert_eq!(refused_var(&[("REDIS_ENABLED", "yes")]), "REDIS_ENABLED");
    assert_eq!(refused_var(&[("REDIS_ENABLED", "TRUE")]), "REDIS_ENABLED");
    assert_eq!(refused_var(&[("LOG_LEVEL", "trace")]), "LOG_LEVEL");
    assert_eq!(refused_var(&[("ENGINE_TYPE", "baileys")]), "ENGINE_TYPE");
    assert_eq!(refused_var(&[("LOG_LEVEL", "verbose")]), "accepted");
}

#[test]
fn webhook_payload_cap_of_zero_is_refused() {
    assert_eq!(
        refused_var(&[("WEBHOOK_MAX_PAYLOAD_BYTES", "0")]),
        "WEBHOOK_MAX_PAYLOAD_BYTES"
    );
}

#[test]
fn audit_retention_takes_any_sign_and_empty_is_unset() {
    assert_eq!(
        load(&[("AUDIT_RETENTION_DAYS", "-5")]).map(|c| c.audit_retention_days),
        Ok(-5)
    );
    assert_eq!(
        load(&[("AUDIT_RETENTION_DAYS", "")]).map(|c| c.audit_retention_days),
        Ok(90)
    );
    assert_eq!(
        refused_var(&[("AUDIT_RETENTION_DAYS", "1.5")]),
        "AUDIT_RETENTION_DAYS"
    );
}

#[test]
fn browser_timeout_bounds() {
    assert_eq!(
        refused_var(&[("BROWSER_PROTOCOL_TIMEOUT_MS", "0")]),
        "BROWSER_PROTOCOL_TIMEOUT_MS"
    );
    assert_eq!(
        refused_var(&[("BROWSER_PROTOCOL_TIMEOUT_MS", "2147483648")]),
        "BROWSER_PROTOCOL_TIMEOUT_MS"
    );
    assert_eq!(
        refused_var(&[("BROWSER_PROTOCOL_TIMEOUT_MS", "2147483647")]),
        "accepted"
    );
}

#[test]
fn production_refuses_a_short_master_key() {
    let short = [("NODE_ENV", "production"), ("API_MASTER_KEY", "too-short")];
    assert_eq!(refused_var(&short), "API_MASTER_KEY");
    assert_eq!(refused_var(&[("API_MASTER_KEY", "too-short")]), "accepted");
}

#[test]
fn body_size_limit_accepts_kb_and_mb() {
    assert_eq!(
        load(&[("BODY_SIZE_LIMIT", "2mb")]).map(|c| c.body_size_limit),
        Ok(2 * 1024 * 1024)
    );
    assert_eq!(
        load(&[("BODY_SIZE_LIMIT", "512kb")]).map(|c| c.body_size_limit),
        Ok(512 * 1024)
    );
    assert_eq!(
        load(&[("BODY_SIZE_LIMIT", "1000")]).map(|c| c.body_size_limit),
        Ok(1000)
    );
    assert_eq!(
        refused_var(&[("BODY_SIZE_LIMIT", "1gb")]),
        "BODY_SIZE_LIMIT"
    );
}

#[test]
fn lease_heartbeat_must_be_under_half_the_ttl() {
    assert_eq!(
        refused_var(&[
            ("SESSION_LEASE_TTL_MS", "10000"),
            ("SESSION_LEASE_HEARTBEAT_MS", "5000")
        ]),
        "SESSION_LEASE_HEARTBEAT_MS"
    );
}

#[test]
fn main_db_replication_defaults_to_none_and_raft_needs_a_secret_redis_and_an_odd_voter_set() {
    let c = load(&[]).expect("defaults load");
    assert_eq!(c.main_db_replication, MainDbReplication::None);
    assert!(c.cluster_secret.is_none());
    assert_eq!(c.raft.heartbeat_ms, 100);
    assert_eq!(c.raft.election_timeout_min_ms, 500);
    assert_eq!(c.raft.election_timeout_max_ms, 800);
    let cluster = [
        ("REDIS_ENABLED", "true"),
        ("CLUSTER_SECRET", "s3cret-s3cret-s3cret"),
        ("MAIN_DB_REPLICATION", "raft"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut pairs = cluster.to_vec();
        pairs.extend_from_slice(extra);
        pairs
    };
    let ok = load(&with(&[("RAFT_VOTERS", "a, b ,c")])).expect("three voters");
    assert_eq!(ok.raft.voters, vec!["a", "b", "c"]);
    assert!(load(&with(&[("RAFT_VOTERS", "a,b,c,d,e")])).is_ok());
    for voters in ["a,b", "a,b,c,d", "a", "a,b,c,d,e,f,g", "a,b,a"] {
        assert_eq!(
            refused_var(&with(&[("RAFT_VOTERS", voters)])),
            "RAFT_VOTERS",
            "{voters}"
        );
    }
    assert_eq!(refused_var(&with(&[])), "RAFT_VOTERS");
    assert_eq!(
        refused_var(&[("MAIN_DB_REPLICATION", "raft"), ("RAFT_VOTERS", "a,b,c")]),
        "CLUSTER_SECRET"
    );
    assert_eq!(
        refused_var(&[
            ("MAIN_DB_REPLICATION", "raft"),
            ("RAFT_VOTERS", "a,b,c"),
            ("CLUSTER_SECRET", "a-cluster-secret-of-enough-length")
        ]),
        "MAIN_DB_REPLICATION"
    );
    assert_eq!(
        refused_var(&[("MAIN_DB_REPLICATION", "paxos")]),
        "MAIN_DB_REPLICATION"
    );
    assert_eq!(
        refused_var(&with(&[
            ("RAFT_VOTERS", "a,b,c"),
            ("RAFT_HEARTBEAT_MS", "600")
        ])),
        "RAFT_ELECTION_TIMEOUT_MIN_MS"
    );
    assert_eq!(
        refused_var(&with(&[
            ("RAFT_VOTERS", "a,b,c"),
            ("RAFT_ELECTION_TIMEOUT_MAX_MS", "500")
        ])),
        "RAFT_ELECTION_TIMEOUT_MAX_MS"
    );
}

#[test]
fn trusted_proxies_take_addresses_and_ranges_and_name_a_bad_entry() {
    assert!(load(&[]).expect("defaults").trusted_proxies.is_empty());
    let c =
        load(&[("TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1,,fd00::/8 ,::1")]).expect("valid list");
    assert_eq!(c.trusted_proxies.len(), 4);
    assert!(
        c.trusted_proxies
            .iter()
            .any(|net| net.contains(&"10.1.2.3".parse::<std::net::IpAddr>().expect("ip")))
    );
    let err = load(&[("TRUSTED_PROXIES", "10.0.0.1,10.0.0.0/33")]).expect_err("bad range");
    assert_eq!(err.var, "TRUSTED_PROXIES");
    assert!(err.rule.contains("'10.0.0.0/33'"), "{}", err.rule);
    let err = load(&[("TRUSTED_PROXIES", "ingress-nginx")]).expect_err("a name");
    assert!(err.rule.contains("'ingress-nginx'"), "{}", err.rule);
}

#[test]
fn a_cluster_secret_is_long_enough_and_a_redis_cluster_may_share_a_generated_one() {
    assert!(
        load(&[("REDIS_ENABLED", "true")])
            .expect("generated through Redis at boot")
            .cluster_secret
            .is_none()
    );
    assert_eq!(
        refused_var(&[("REDIS_ENABLED", "true"), ("CLUSTER_SECRET", "short")]),
        "CLUSTER_SECRET"
    );
    let c = load(&[
        ("REDIS_ENABLED", "true"),
        ("CLUSTER_SECRET", "a-cluster-secret-of-enough-length"),
    ])
    .expect("secret given");
    assert!(c.cluster_secret.is_some());
    assert!(load(&[]).expect("embedded").cluster_secret.is_none());
}

#[test]
fn handover_wait_is_bounded_and_may_be_zero() {
    assert_eq!(load(&[]).expect("defaults").session_handover_wait_ms, 5_000);
    let zero = load(&[("SESSION_HANDOVER_WAIT_MS", "0")]).expect("0 accepted");
    assert_eq!(zero.session_handover_wait_ms, 0);
    assert_eq!(
        refused_var(&[("SESSION_HANDOVER_WAIT_MS", "60001")]),
        "SESSION_HANDOVER_WAIT_MS"
    );
    assert_eq!(
        refused_var(&[("SESSION_HANDOVER_WAIT_MS", "soon")]),
        "SESSION_HANDOVER_WAIT_MS"
    );
}

#[test]
fn storage_is_local_by_default_and_s3_needs_a_bucket_and_a_parseable_endpoint() {
    assert_eq!(load(&[]).expect("defaults").storage, StorageConfig::Local);
    assert_eq!(refused_var(&[("STORAGE_TYPE", "gcs")]), "STORAGE_TYPE");
    let missing = load(&[("STORAGE_TYPE", "s3")]).expect_err("no bucket");
    assert_eq!(missing.var, "S3_BUCKET");
    assert_eq!(
        missing.to_string(),
        "invalid configuration: S3_BUCKET is required when STORAGE_TYPE=s3"
    );
    for bad in ["minio:9000", "ftp://minio:9000", "http://"] {
        assert_eq!(
            refused_var(&[
                ("STORAGE_TYPE", "s3"),
                ("S3_BUCKET", "media"),
                ("S3_ENDPOINT", bad)
            ]),
            "S3_ENDPOINT",
            "{bad}"
        );
    }
    assert_eq!(
        refused_var(&[
            ("STORAGE_TYPE", "s3"),
            ("S3_BUCKET", "media"),
            ("S3_FORCE_PATH_STYLE", "1")
        ]),
        "S3_FORCE_PATH_STYLE"
    );
    let c = load(&[
        ("STORAGE_TYPE", "s3"),
        ("S3_BUCKET", "media"),
        ("S3_ENDPOINT", "http://127.0.0.1:9000"),
        ("S3_FORCE_PATH_STYLE", "true"),
        ("AWS_ACCESS_KEY_ID", "id"),
        ("AWS_SECRET_ACCESS_KEY", "hidden-key-value"),
    ])
    .expect("s3 settings");
    let StorageConfig::S3(s3) = &c.storage else {
        panic!("not s3: {:?}", c.storage);
    };
    assert_eq!(s3.bucket, "media");
    assert_eq!(s3.region, "us-east-1");
    assert!(s3.force_path_style);
    assert_eq!(
        s3.endpoint.as_ref().map(url::Url::as_str),
        Some("http://127.0.0.1:9000/")
    );
    assert!(
        !format!("{c:?}").contains("hidden-key-value"),
        "the secret stays out of Debug"
    );
}

#[test]
fn node_url_is_an_http_url_and_defaults_to_the_api_port() {
    let c = load(&[("API_PORT", "9100")]).expect("defaults");
    assert_eq!(c.node_url, "http://127.0.0.1:9100");
    let given = load(&[("NODE_URL", "http://wagate-0.peers:2785")]).expect("given");
    assert_eq!(given.node_url, "http://wagate-0.peers:2785");
    for bad in ["notaurl", "ftp://x", "wagate-0.peers:2785", "http://"] {
        assert_eq!(refused_var(&[("NODE_URL", bad)]), "NODE_URL", "{bad}");
        let cluster = [
            ("REDIS_ENABLED", "true"),
            ("ROLE", "api"),
            ("NODE_URL", bad),
        ];
        assert_eq!(refused_var(&cluster), "NODE_URL", "cluster: {bad}");
    }
}

#[test]
fn bind_host_redis_url_and_database_url_are_checked_before_boot() {
    assert_eq!(
        load(&[("BIND_HOST", "::")]).map(|c| c.bind_host),
        Ok("::".to_owned())
    );
    for bad in ["999.1.1.1", "not an ip", "0.0.0.0:2785"] {
        assert_eq!(refused_var(&[("BIND_HOST", bad)]), "BIND_HOST", "{bad}");
    }
    for bad in ["notaurl", "http://127.0.0.1:6379", "rediss://cache"] {
        let pairs = [("REDIS_ENABLED", "true"), ("REDIS_URL", bad)];
        assert_eq!(refused_var(&pairs), "REDIS_URL", "{bad}");
    }
    let postgres = |url| [("DATABASE_TYPE", "postgres"), ("DATABASE_URL", url)];
    assert_eq!(refused_var(&postgres("mysql://db/x")), "DATABASE_URL");
    assert_eq!(refused_var(&postgres("postgresql://db/x")), "accepted");
    assert_eq!(
        refused_var(&[("DATABASE_URL", "postgres://db/x")]),
        "DATABASE_URL",
        "a PostgreSQL URL with DATABASE_TYPE=sqlite"
    );
}
