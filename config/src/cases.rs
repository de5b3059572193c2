//! The one table of good and bad values for the knobs both binaries read. The config crate's tests parse it
//! for `wagate` and `wagate-worker` in process; each binary's boot test runs the real binary with every bad
//! row and expects the same line on stderr and [`crate::EXIT_REFUSED`] ([`check_binary`]).

use std::path::Path;
use std::process::Command;

/// A refused setting: the variables to set and the exact line both binaries print.
pub struct Refused {
    pub env: &'static [(&'static str, &'static str)],
    pub line: &'static str,
}

pub const REFUSED: &[Refused] = &[
    Refused {
        env: &[("WEBHOOK_TIMEOUT", "1e4")],
        line: "invalid configuration: WEBHOOK_TIMEOUT must be a plain decimal integer (got '1e4')",
    },
    Refused {
        env: &[("WEBHOOK_RETRY_DELAY", "0x100")],
        line: "invalid configuration: WEBHOOK_RETRY_DELAY must be a plain decimal integer (got '0x100')",
    },
    Refused {
        env: &[("WEBHOOK_DISPATCH_CONCURRENCY", "-1")],
        line: "invalid configuration: WEBHOOK_DISPATCH_CONCURRENCY must be a plain decimal integer (got '-1')",
    },
    Refused {
        env: &[("WEBHOOK_MAX_PAYLOAD_BYTES", "0")],
        line: "invalid configuration: WEBHOOK_MAX_PAYLOAD_BYTES must be a positive integer (0 is refused)",
    },
    Refused {
        env: &[("OUTBOX_STALE_MS", "10ms")],
        line: "invalid configuration: OUTBOX_STALE_MS must be a plain decimal integer (got '10ms')",
    },
    Refused {
        env: &[("OUTBOX_RECONCILE_MS", "0")],
        line: "invalid configuration: OUTBOX_RECONCILE_MS must be a positive integer (0 is refused)",
    },
    Refused {
        env: &[("REDIS_ENABLED", "yes")],
        line: "invalid configuration: REDIS_ENABLED must be exactly true or false (got 'yes')",
    },
    Refused {
        env: &[("WEBHOOK_SSRF_PROTECT", "TRUE")],
        line: "invalid configuration: WEBHOOK_SSRF_PROTECT must be exactly true or false (got 'TRUE')",
    },
    Refused {
        env: &[("LOG_LEVEL", "trace")],
        line: "invalid configuration: LOG_LEVEL must be error, warn, info, debug or verbose (got 'trace')",
    },
    Refused {
        env: &[("LOG_FORMAT", "JSON")],
        line: "invalid configuration: LOG_FORMAT must be text or json (got 'JSON')",
    },
    Refused {
        env: &[("DATABASE_TYPE", "mysql")],
        line: "invalid configuration: DATABASE_TYPE must be sqlite or postgres (got 'mysql')",
    },
    Refused {
        env: &[("DATABASE_TYPE", "postgresql")],
        line: "invalid configuration: DATABASE_URL is required when DATABASE_TYPE=postgres",
    },
    Refused {
        env: &[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")],
        line: "invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL (got 'localhost:4318')",
    },
];

/// Refused settings of knobs only `wagate` reads (the worker ignores them): the media storage backend and
/// the browser engine's page.
pub const NODE_REFUSED: &[Refused] = &[
    Refused {
        env: &[("STORAGE_TYPE", "gcs")],
        line: "invalid configuration: STORAGE_TYPE must be local or s3 (got 'gcs')",
    },
    Refused {
        env: &[("STORAGE_TYPE", "s3")],
        line: "invalid configuration: S3_BUCKET is required when STORAGE_TYPE=s3",
    },
    Refused {
        env: &[("STORAGE_TYPE", "s3"), ("S3_BUCKET", "Media_Bucket")],
        line: "invalid configuration: S3_BUCKET must be 3 to 63 lower-case letters, digits, dots or hyphens (got 'Media_Bucket')",
    },
    Refused {
        env: &[
            ("STORAGE_TYPE", "s3"),
            ("S3_BUCKET", "media"),
            ("S3_ENDPOINT", "minio:9000"),
        ],
        line: "invalid configuration: S3_ENDPOINT must be an http:// or https:// URL (got 'minio:9000')",
    },
    Refused {
        env: &[("S3_FORCE_PATH_STYLE", "1")],
        line: "invalid configuration: S3_FORCE_PATH_STYLE must be exactly true or false (got '1')",
    },
    Refused {
        env: &[
            ("STORAGE_TYPE", "s3"),
            ("S3_BUCKET", "media"),
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ],
        line: "invalid configuration: AWS_SECRET_ACCESS_KEY and AWS_ACCESS_KEY_ID must be set together",
    },
    Refused {
        env: &[("BROWSER_WEB_URL", "web.whatsapp.com")],
        line: "invalid configuration: BROWSER_WEB_URL must be an http:// or https:// URL (got 'web.whatsapp.com')",
    },
    Refused {
        env: &[("BROWSER_WEB_URL", "wss://web.whatsapp.com/")],
        line: "invalid configuration: BROWSER_WEB_URL must be an http:// or https:// URL (got 'wss://web.whatsapp.com/')",
    },
];

/// Settings `wagate` accepts for its media storage and its browser engine's page.
pub const NODE_ACCEPTED: &[&[(&str, &str)]] = &[
    &[
        ("STORAGE_TYPE", "local"),
        ("S3_BUCKET", "ignored-when-local"),
    ],
    &[("STORAGE_TYPE", "s3"), ("S3_BUCKET", "wagate-media")],
    &[
        ("STORAGE_TYPE", "s3"),
        ("S3_BUCKET", "wagate-media"),
        ("S3_REGION", "eu-west-1"),
        ("S3_ENDPOINT", "http://127.0.0.1:9000"),
        ("S3_FORCE_PATH_STYLE", "true"),
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "example-secret"),
    ],
    &[("BROWSER_WEB_URL", "http://127.0.0.1:8080/")],
];

/// Settings both binaries accept, with the same meaning.
pub const ACCEPTED: &[&[(&str, &str)]] = &[
    &[],
    &[
        ("DATABASE_TYPE", "postgresql"),
        ("DATABASE_URL", "postgres://db/wagate"),
    ],
    &[
        ("DATABASE_TYPE", "postgres"),
        ("DATABASE_URL", "postgres://db/wagate"),
    ],
    &[("WEBHOOK_TIMEOUT", " 2500 "), ("OUTBOX_STALE_MS", "0")],
    &[("WEBHOOK_TIMEOUT", ""), ("LOG_LEVEL", "  ")],
    &[("LOG_LEVEL", "verbose"), ("LOG_FORMAT", "json")],
    &[("REDIS_ENABLED", "true"), ("QUEUE_PREFIX", "blue-")],
    &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")],
];

/// Runs the real `binary` (whose knobs are `K`'s) with `--help` and with every [`REFUSED`] row and every row
/// of `own` (its own knobs' table, such as [`NODE_REFUSED`]), in an empty working directory with `DATA_DIR`
/// inside it: help lists every knob and exits 0, each row prints its line alone on stderr and exits
/// [`crate::EXIT_REFUSED`], and nothing is written before either.
pub fn check_binary<K: clap::CommandFactory>(binary: &Path, own: &[Refused]) -> Result<(), String> {
    let scratch = std::env::temp_dir().join(format!(
        "wagate-config-check-{}-{}",
        std::process::id(),
        K::command().get_name()
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let run = |args: &[&str], env: &[(&str, &str)]| {
        Command::new(binary)
            .args(args)
            .env_clear()
            .env("DATA_DIR", scratch.join("data"))
            .envs(env.iter().copied())
            .current_dir(&scratch)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", binary.display()))
    };
    let untouched = || -> Result<(), String> {
        let left: Vec<_> = std::fs::read_dir(&scratch)
            .map_err(|e| e.to_string())?
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("wrote {left:?} before stopping"))
        }
    };
    let help = run(&["--help"], &[("API_PORT", "bad"), ("LOG_LEVEL", "loud")])?;
    let text = String::from_utf8_lossy(&help.stdout);
    if help.status.code() != Some(0) {
        return Err(format!(
            "--help exited {:?}: {}",
            help.status.code(),
            String::from_utf8_lossy(&help.stderr)
        ));
    }
    for arg in K::command().get_arguments() {
        let Some(var) = arg.get_env() else { continue };
        let tag = format!("[env: {}]", var.to_string_lossy());
        if !text.contains(&tag) {
            return Err(format!("--help does not list {tag}"));
        }
    }
    untouched()?;
    for case in REFUSED.iter().chain(own) {
        let out = run(&[], case.env)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(i32::from(crate::EXIT_REFUSED))
            || stderr.trim_end() != case.line
        {
            return Err(format!(
                "{:?}: exit {:?}, stderr {stderr:?}, want {:?}",
                case.env,
                out.status.code(),
                case.line
            ));
        }
        untouched()?;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
