//! The one table of good and bad values for the knobs both binaries read. The config crate's tests parse it
//! for `wagate` and `wagate-worker` in process; each binary's boot test runs the real binary with every bad
//! row and expects the same line on stderr and [`crate::EXIT_REFUSED`].

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
