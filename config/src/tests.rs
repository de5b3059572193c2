use std::collections::BTreeSet;

use clap::CommandFactory;

use super::*;
use crate::cases::{ACCEPTED, NODE_ACCEPTED, NODE_REFUSED, REFUSED};

fn node(pairs: &[(&str, &str)]) -> Result<NodeCli, Stop> {
    load(["wagate"], &Source::from_pairs(pairs.iter().copied()))
}

fn worker(pairs: &[(&str, &str)]) -> Result<WorkerCli, Stop> {
    load(
        ["wagate-worker"],
        &Source::from_pairs(pairs.iter().copied()),
    )
}

/// What a binary would print on stderr: the first refusal of the knobs, then of the shared checks.
fn refusal<K>(parsed: Result<K, Stop>, shared: impl Fn(&K) -> &knobs::SharedKnobs) -> String {
    match parsed {
        Err(Stop::Refused(e)) => e.to_string(),
        Err(Stop::Show(_)) => "help shown".to_owned(),
        Ok(k) => match shared(&k).database_url() {
            Err(e) => e.to_string(),
            Ok(_) => "accepted".to_owned(),
        },
    }
}

#[test]
fn both_binaries_refuse_each_bad_row_with_the_same_line() {
    for case in REFUSED {
        assert_eq!(refusal(node(case.env), |n| &n.shared), case.line);
        assert_eq!(refusal(worker(case.env), |w| &w.shared), case.line);
    }
}

/// The node's own table (media storage, the browser page): each row is refused with its line (the storage
/// rules run after the knobs parse, as in the binary); the worker reads none of these knobs and starts.
#[test]
fn the_node_refuses_its_own_rows_and_the_worker_ignores_them() {
    for case in NODE_REFUSED {
        let line = match node(case.env) {
            Err(Stop::Refused(e)) => e.to_string(),
            Err(Stop::Show(_)) => "help shown".to_owned(),
            Ok(n) => match n.storage.settings() {
                Err(e) => e.to_string(),
                Ok(_) => "accepted".to_owned(),
            },
        };
        assert_eq!(line, case.line);
        assert_eq!(refusal(worker(case.env), |w| &w.shared), "accepted");
    }
    for row in NODE_ACCEPTED {
        let pairs = row.env;
        let n = node(pairs).unwrap_or_else(|e| panic!("{pairs:?}: {e:?}"));
        let settings = n.storage.settings();
        assert!(settings.is_ok(), "{pairs:?}: {settings:?}");
    }
}

#[test]
fn storage_settings_carry_every_s3_knob_and_keep_the_secret_out_of_debug() {
    let n = node(&[]).expect("defaults");
    assert_eq!(n.storage.settings(), Ok(StorageConfig::Local));
    let s3_row = |with_endpoint: bool| {
        NODE_ACCEPTED
            .iter()
            .map(|row| row.env)
            .find(|env| {
                env.contains(&("STORAGE_TYPE", "s3"))
                    && env.iter().any(|(k, _)| *k == "S3_ENDPOINT") == with_endpoint
            })
            .expect("an s3 row")
    };
    let n = node(s3_row(true)).expect("s3");
    let Ok(StorageConfig::S3(s3)) = n.storage.settings() else {
        panic!("s3 expected");
    };
    assert_eq!(s3.bucket, "wagate-media");
    assert_eq!(s3.region, "eu-west-1");
    assert_eq!(
        s3.endpoint.as_ref().map(url::Url::as_str),
        Some("http://127.0.0.1:9000/")
    );
    assert!(s3.force_path_style);
    assert_eq!(s3.access_key_id.as_deref(), Some("AKIDEXAMPLE"));
    assert_eq!(s3.secret_access_key.as_deref(), Some("example-secret"));
    assert!(!format!("{s3:?}").contains("example-secret"));
    let n = node(s3_row(false)).expect("s3 on AWS");
    let Ok(StorageConfig::S3(s3)) = n.storage.settings() else {
        panic!("s3 expected");
    };
    assert_eq!(
        (s3.region.as_str(), s3.endpoint, s3.force_path_style),
        ("us-east-1", None, false)
    );
}

#[test]
fn both_binaries_read_each_good_row_alike() {
    for row in ACCEPTED {
        let pairs = row.env;
        let n = node(pairs).unwrap_or_else(|e| panic!("{pairs:?}: {e:?}"));
        let w = worker(pairs).unwrap_or_else(|e| panic!("{pairs:?}: {e:?}"));
        assert_eq!(n.shared, w.shared, "{pairs:?}");
        assert!(n.shared.database_url().is_ok());
    }
}

#[test]
fn defaults_match_the_spec() {
    let n = node(&[]).expect("defaults");
    assert_eq!(n.server.api_port, 2785);
    assert_eq!(n.engine.engine_type, EngineType::Browser);
    assert_eq!(n.limits.body_size_limit, 25 * 1024 * 1024);
    assert_eq!(n.limits.media_download_max_bytes, 50 * 1024 * 1024);
    assert_eq!(n.shared.webhooks.webhook_timeout, 10_000);
    assert_eq!(n.shared.webhooks.webhook_retry_delay, 5_000);
    assert_eq!(n.shared.webhooks.webhook_max_payload_bytes, 1024 * 1024);
    assert_eq!(n.server.audit_retention_days, 90);
    assert_eq!(n.engine.browser_protocol_timeout_ms, 180_000);
    assert_eq!(
        n.shared.database_url().as_deref(),
        Ok("./data/wagate.sqlite")
    );
    assert_eq!(worker(&[]).expect("defaults").worker.metrics_port, 9464);
}

/// Every numeric knob of either binary (its default a plain integer) has an upper bound: the largest u64 and
/// anything past it are refused, naming the knob, as its kind's range says; a knob whose rule read any u64
/// would accept a value that overflows where it is used. `AUDIT_RETENTION_DAYS` alone takes any i64, as the
/// spec says (pruning subtracts it saturating).
#[test]
fn every_numeric_knob_refuses_what_no_bound_allows() {
    for cmd in [NodeCli::command(), WorkerCli::command()] {
        for arg in cmd.get_arguments() {
            let Some(var) = arg.get_env().map(|v| v.to_string_lossy().into_owned()) else {
                continue;
            };
            let is_numeric = arg.get_default_values().first().is_some_and(|d| {
                let d = d.to_string_lossy();
                !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
            });
            if !is_numeric {
                continue;
            }
            let any_i64 = var == "AUDIT_RETENTION_DAYS";
            let values = [
                "18446744073709551615",
                "18446744073709551616",
                "9223372036854775807",
            ];
            for value in values.into_iter().take(if any_i64 { 2 } else { 3 }) {
                let pairs = [(var.as_str(), value)];
                let parsed = match cmd.get_name() {
                    "wagate" => node(&pairs).map(|_| ()),
                    _ => worker(&pairs).map(|_| ()),
                };
                match parsed {
                    Err(Stop::Refused(e)) => assert_eq!(e.var, var, "{e}"),
                    other => panic!("{var}={value}: {other:?}"),
                }
            }
        }
    }
}

/// The knobs of each kind take exactly its top value; `bytes`, `count` and the ms knobs default well inside.
#[test]
fn each_kind_takes_its_bound() {
    let n = node(&[
        ("WEBHOOK_DISPATCH_CONCURRENCY", "1000000"),
        ("MEDIA_CONVERSION_QUEUE", "1000000"),
        ("RATE_LIMIT_LONG_TTL", "2147483647"),
        ("SESSION_LEASE_TTL_MS", "2147483647"),
        ("MEDIA_CONVERSION_MAX_OUTPUT_BYTES", "1099511627776"),
        ("BODY_SIZE_LIMIT", "1048576mb"),
        ("BROWSER_MAX_RSS_MB", "1048576"),
        ("SEND_PACING_WARMUP_DAYS", "3650"),
    ])
    .expect("bounds load");
    assert_eq!(
        n.shared.webhooks.webhook_dispatch_concurrency,
        values::MAX_COUNT
    );
    assert_eq!(n.media.media_conversion_queue, values::MAX_COUNT);
    assert_eq!(n.limits.rate_limit_long_ttl, values::MAX_TIMEOUT_MS);
    assert_eq!(n.cluster.session_lease_ttl_ms, values::MAX_TIMEOUT_MS);
    assert_eq!(n.media.media_conversion_max_output_bytes, values::MAX_BYTES);
    assert_eq!(n.limits.body_size_limit, values::MAX_BYTES);
    assert_eq!(n.engine.browser_max_rss_mb, values::MAX_MIB);
    assert_eq!(n.pacing.send_pacing_warmup_days, values::MAX_DAYS);
    let d = node(&[]).expect("defaults");
    assert_eq!(d.limits.rate_limit_long_ttl, 3_600_000);
    assert_eq!(d.media.storage_export_ttl_ms, 3_600_000);
    assert_eq!(d.media.media_conversion_queue, 8);
    assert_eq!(d.cluster.session_lease_ttl_ms, 15_000);
}

#[test]
fn padding_is_ignored_and_empty_reads_as_unset() {
    let n = node(&[("AUDIT_RETENTION_DAYS", " -5 "), ("API_MASTER_KEY", "")]).expect("loads");
    assert_eq!(n.server.audit_retention_days, -5);
    assert_eq!(n.server.api_master_key, None);
    let n = node(&[("AUDIT_RETENTION_DAYS", "")]).expect("loads");
    assert_eq!(n.server.audit_retention_days, 90);
}

#[test]
fn a_command_line_option_wins_over_the_environment() {
    let source = Source::from_pairs([("API_PORT", "9000"), ("LOG_LEVEL", "debug")]);
    let n: NodeCli = load(["wagate", "--api-port", "9001"], &source).expect("loads");
    assert_eq!(n.server.api_port, 9001);
    assert_eq!(n.shared.log_level, LogLevel::Debug);
}

#[test]
fn help_lists_every_knob_with_its_default_even_when_a_value_is_bad() {
    let source = Source::from_pairs([("API_PORT", "not-a-port"), ("API_MASTER_KEY", "s3cr3t")]);
    let Err(Stop::Show(help)) = load::<NodeCli>(["wagate", "--help"], &source) else {
        panic!("help expected");
    };
    for arg in NodeCli::command().get_arguments() {
        if let Some(var) = arg.get_env() {
            assert!(
                help.contains(&format!("[env: {}]", var.to_string_lossy())),
                "{var:?}"
            );
        }
    }
    assert!(help.contains("[default: 2785]"));
    assert!(help.contains("[default: 25mb]"));
    assert!(!help.contains("s3cr3t"), "values are never shown");
    let Err(Stop::Show(help)) = load::<WorkerCli>(["wagate-worker", "-h"], &source) else {
        panic!("help expected");
    };
    assert!(help.contains("[env: METRICS_PORT]") && help.contains("[env: OUTBOX_RECONCILE_MS]"));
    assert!(
        !help.contains("API_PORT"),
        "the worker lists only what it reads"
    );
}

/// `--help` gives every knob of either binary a meaning, not only its variable and default.
#[test]
fn every_knob_has_a_meaning() {
    for cmd in [NodeCli::command(), WorkerCli::command()] {
        for arg in cmd.get_arguments() {
            let Some(var) = arg.get_env() else { continue };
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            assert!(
                !help.trim().is_empty(),
                "{} {var:?} has no help text (a doc comment on its field)",
                cmd.get_name()
            );
        }
    }
}

#[test]
fn an_unknown_option_is_one_line() {
    let Err(Stop::Refused(e)) = load::<WorkerCli>(
        ["wagate-worker", "--bogus"],
        &Source::from_pairs(Vec::<(String, String)>::new()),
    ) else {
        panic!("refusal expected");
    };
    assert!(!e.to_string().contains('\n'), "{e}");
    assert!(e.to_string().contains("--bogus"), "{e}");
}

#[test]
fn the_env_file_fills_what_the_environment_lacks() {
    let dir = std::env::temp_dir().join(format!("wagate-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(".env");
    std::fs::write(
        &path,
        "API_PORT=9100\nLOG_LEVEL=debug\n# a comment\nQUEUE_PREFIX=\n",
    )
    .expect("write");
    let source =
        Source::layered(|k| (k == "LOG_LEVEL").then(|| "warn".to_owned()), &path).expect("reads");
    let n: NodeCli = load(["wagate"], &source).expect("loads");
    assert_eq!(n.server.api_port, 9100);
    assert_eq!(n.shared.log_level, LogLevel::Warn, "the environment wins");
    assert_eq!(n.shared.queue_prefix, "");
    let missing = Source::layered(|_| None, &dir.join("absent.env")).expect("no file is fine");
    assert_eq!(missing.get("API_PORT"), None);
    std::fs::write(&path, "NOT A LINE\n").expect("write");
    let err = Source::layered(|_| None, &path).err().expect("refused");
    assert_eq!(err.var, ".env");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `.env.example` lists exactly the knobs the binaries define, without inline comments after values.
#[test]
fn env_example_matches_the_knobs() {
    let example = include_str!("../../.env.example");
    let mut listed = BTreeSet::new();
    for line in example.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once('=').expect("KEY=value");
        assert!(!value.contains(" #"), "inline comment after {key}");
        listed.insert(key.to_owned());
    }
    let mut defined = BTreeSet::new();
    for cmd in [NodeCli::command(), WorkerCli::command()] {
        for arg in cmd.get_arguments() {
            if let Some(var) = arg.get_env() {
                defined.insert(var.to_string_lossy().into_owned());
            }
        }
    }
    assert_eq!(listed, defined);
}
