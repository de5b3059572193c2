//! The one table of good and bad values for the knobs both binaries read. The config crate's tests parse it
//! for `wagate` and `wagate-worker` in process; each binary's boot test runs the real binary with every bad
//! row and expects the same line on stderr and [`crate::EXIT_REFUSED`] ([`check_binary`]), and runs every
//! good row through its own configuration loader, checking what the row says it reads ([`check_loader`]).

use std::path::Path;
use std::process::Command;

use crate::{DatabaseType, LogFormat, LogLevel, Source, Stop};

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
    // Each numeric knob has the bound of its kind (counts, milliseconds, bytes): a value past it would
    // overflow or panic where it is used (a semaphore's permits, µs sums, ffmpeg's -fs, Redis PX).
    Refused {
        env: &[("WEBHOOK_DISPATCH_CONCURRENCY", "2305843009213693952")],
        line: "invalid configuration: WEBHOOK_DISPATCH_CONCURRENCY must be between 1 and 1000000 (got '2305843009213693952')",
    },
    Refused {
        env: &[("WEBHOOK_DISPATCH_CONCURRENCY", "1000001")],
        line: "invalid configuration: WEBHOOK_DISPATCH_CONCURRENCY must be between 1 and 1000000 (got '1000001')",
    },
    Refused {
        env: &[("WEBHOOK_TIMEOUT", "18446744073709551616")],
        line: "invalid configuration: WEBHOOK_TIMEOUT must be between 1 and 2147483647 milliseconds (got '18446744073709551616')",
    },
    Refused {
        env: &[("OUTBOX_STALE_MS", "2147483648")],
        line: "invalid configuration: OUTBOX_STALE_MS must be between 0 and 2147483647 milliseconds (got '2147483648')",
    },
    Refused {
        env: &[("WEBHOOK_MAX_PAYLOAD_BYTES", "1099511627777")],
        line: "invalid configuration: WEBHOOK_MAX_PAYLOAD_BYTES must be between 1 and 1099511627776 bytes (got '1099511627777')",
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
    Refused {
        env: &[("OTEL_TRACES_SAMPLER", "xray")],
        line: "invalid configuration: OTEL_TRACES_SAMPLER must be always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio (got 'xray')",
    },
    Refused {
        env: &[("OTEL_TRACES_SAMPLER", "ParentBased_AlwaysOn")],
        line: "invalid configuration: OTEL_TRACES_SAMPLER must be always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio (got 'ParentBased_AlwaysOn')",
    },
    Refused {
        env: &[
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
        ],
        line: "invalid configuration: OTEL_TRACES_SAMPLER_ARG must be a decimal number between 0 and 1 (got '1.5')",
    },
    Refused {
        env: &[("OTEL_TRACES_SAMPLER_ARG", "1e-1")],
        line: "invalid configuration: OTEL_TRACES_SAMPLER_ARG must be a decimal number between 0 and 1 (got '1e-1')",
    },
    Refused {
        env: &[("BIND_HOST", "999.1.1.1")],
        line: "invalid configuration: BIND_HOST must be an IP address or a host name (got '999.1.1.1')",
    },
    Refused {
        env: &[("BIND_HOST", "bad host")],
        line: "invalid configuration: BIND_HOST must be an IP address or a host name (got 'bad host')",
    },
    Refused {
        env: &[("BIND_HOST", "127.0.0.1:2785")],
        line: "invalid configuration: BIND_HOST must be an IP address or a host name (got '127.0.0.1:2785')",
    },
    Refused {
        env: &[("REDIS_ENABLED", "true"), ("REDIS_URL", "notaurl")],
        line: "invalid configuration: REDIS_URL must be a redis://host[:port][/db] or unix:///path/to/socket URL (the value is not a URL)",
    },
    Refused {
        env: &[
            ("REDIS_ENABLED", "true"),
            ("REDIS_URL", "http://127.0.0.1:6379"),
        ],
        line: "invalid configuration: REDIS_URL must be a redis://host[:port][/db] or unix:///path/to/socket URL (got scheme 'http')",
    },
    Refused {
        env: &[("REDIS_URL", "rediss://:secret@cache:6380")],
        line: "invalid configuration: REDIS_URL is a TLS URL, which this build cannot connect with; use redis://",
    },
    Refused {
        env: &[("REDIS_URL", "redis://:secret@cache:6379/zero")],
        line: "invalid configuration: REDIS_URL must end in a database number, if any (redis://host[:port][/db])",
    },
    Refused {
        env: &[
            ("DATABASE_TYPE", "postgres"),
            ("DATABASE_URL", "mysql://wagate:secret@db/wagate"),
        ],
        line: "invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL when DATABASE_TYPE=postgres (got scheme 'mysql')",
    },
    Refused {
        env: &[
            ("DATABASE_TYPE", "postgres"),
            ("DATABASE_URL", "db:5432/wagate"),
        ],
        line: "invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL when DATABASE_TYPE=postgres (got scheme 'db')",
    },
    Refused {
        env: &[("DATABASE_URL", "postgres://wagate:secret@db/wagate")],
        line: "invalid configuration: DATABASE_URL must be a file path or a sqlite: URL when DATABASE_TYPE=sqlite (got scheme 'postgres')",
    },
];

/// Refused settings of knobs only `wagate` reads (the worker ignores them): the media storage backend, the
/// browser engine's page, the benchmark switches and the bounds of the node's numeric knobs.
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
    Refused {
        env: &[("NODE_URL", "notaurl")],
        line: "invalid configuration: NODE_URL must be an http:// or https:// URL (got 'notaurl')",
    },
    Refused {
        env: &[("NODE_URL", "ftp://x")],
        line: "invalid configuration: NODE_URL must be an http:// or https:// URL (got 'ftp://x')",
    },
    Refused {
        env: &[
            ("REDIS_ENABLED", "true"),
            ("ROLE", "api"),
            ("NODE_URL", "wagate-0.wagate-peers:2785"),
        ],
        line: "invalid configuration: NODE_URL must be an http:// or https:// URL (got 'wagate-0.wagate-peers:2785')",
    },
    Refused {
        env: &[("MEDIA_CONVERSION_CONCURRENCY", "2305843009213693952")],
        line: "invalid configuration: MEDIA_CONVERSION_CONCURRENCY must be between 1 and 1000000 (got '2305843009213693952')",
    },
    Refused {
        env: &[
            ("ENGINE_TYPE", "browser"),
            ("BROWSER_LAUNCH_CONCURRENCY", "2305843009213693952"),
        ],
        line: "invalid configuration: BROWSER_LAUNCH_CONCURRENCY must be between 1 and 1000000 (got '2305843009213693952')",
    },
    Refused {
        env: &[("MEDIA_CONVERSION_QUEUE", "18446744073709551614")],
        line: "invalid configuration: MEDIA_CONVERSION_QUEUE must be between 0 and 1000000 (got '18446744073709551614')",
    },
    Refused {
        env: &[("MEDIA_CONVERSION_QUEUE", "1000001")],
        line: "invalid configuration: MEDIA_CONVERSION_QUEUE must be between 0 and 1000000 (got '1000001')",
    },
    Refused {
        env: &[("RATE_LIMIT_LONG_LIMIT", "1000000001")],
        line: "invalid configuration: RATE_LIMIT_LONG_LIMIT must be between 1 and 1000000000 (got '1000000001')",
    },
    Refused {
        env: &[("RATE_LIMIT_SHORT_TTL", "18446744073709552")],
        line: "invalid configuration: RATE_LIMIT_SHORT_TTL must be between 1 and 2147483647 milliseconds (got '18446744073709552')",
    },
    Refused {
        env: &[("RATE_LIMIT_MEDIUM_TTL", "18446744073709552")],
        line: "invalid configuration: RATE_LIMIT_MEDIUM_TTL must be between 1 and 2147483647 milliseconds (got '18446744073709552')",
    },
    Refused {
        env: &[("RATE_LIMIT_LONG_TTL", "18446744073709552")],
        line: "invalid configuration: RATE_LIMIT_LONG_TTL must be between 1 and 2147483647 milliseconds (got '18446744073709552')",
    },
    Refused {
        env: &[("STORAGE_EXPORT_TTL_MS", "2147483648")],
        line: "invalid configuration: STORAGE_EXPORT_TTL_MS must be between 1 and 2147483647 milliseconds (got '2147483648')",
    },
    Refused {
        env: &[
            ("REDIS_ENABLED", "true"),
            ("SESSION_LEASE_TTL_MS", "18446744073709551615"),
        ],
        line: "invalid configuration: SESSION_LEASE_TTL_MS must be between 1 and 2147483647 milliseconds (got '18446744073709551615')",
    },
    Refused {
        env: &[("MEDIA_CONVERSION_MAX_OUTPUT_BYTES", "9223372036854775806")],
        line: "invalid configuration: MEDIA_CONVERSION_MAX_OUTPUT_BYTES must be between 1 and 1099511627776 bytes (got '9223372036854775806')",
    },
    Refused {
        env: &[("EXPORT_INLINE_MEDIA_BUDGET_BYTES", "1099511627777")],
        line: "invalid configuration: EXPORT_INLINE_MEDIA_BUDGET_BYTES must be between 0 and 1099511627776 bytes (got '1099511627777')",
    },
    Refused {
        env: &[("BODY_SIZE_LIMIT", "1048577mb")],
        line: "invalid configuration: BODY_SIZE_LIMIT must be between 1 and 1099511627776 bytes (1048576mb) (got '1048577mb')",
    },
    Refused {
        env: &[("BROWSER_MAX_RSS_MB", "1048577")],
        line: "invalid configuration: BROWSER_MAX_RSS_MB must be between 0 and 1048576 MiB (got '1048577')",
    },
    Refused {
        env: &[("SEND_PACING_WARMUP_DAYS", "3651")],
        line: "invalid configuration: SEND_PACING_WARMUP_DAYS must be between 0 and 3650 days (got '3651')",
    },
    Refused {
        env: &[("WAGATE_BENCH_ACK_ON_RECEIPT", "1")],
        line: "invalid configuration: WAGATE_BENCH_ACK_ON_RECEIPT must be exactly true or false (got '1')",
    },
    Refused {
        env: &[("WAGATE_BENCH_LOCAL_LIMITER", "yes")],
        line: "invalid configuration: WAGATE_BENCH_LOCAL_LIMITER must be exactly true or false (got 'yes')",
    },
];

/// A setting a binary accepts: the variables to set and values its loaded configuration must hold.
pub struct Accepted {
    pub env: &'static [(&'static str, &'static str)],
    /// What the binary read, where the row says (empty: the row only has to load).
    pub expect: &'static [Expect],
}

/// A value a loaded configuration holds, named by its knob. Each binary's test answers every variant of the
/// knobs it reads (a variant of a knob it does not read fails the row), so a new one cannot go unchecked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expect {
    DatabaseType(DatabaseType),
    /// The data database's URL as the binary resolves it (`DATA_DIR/wagate.sqlite` when unset).
    DatabaseUrl(&'static str),
    WebhookTimeoutMs(u64),
    OutboxStaleMs(u64),
    LogLevel(LogLevel),
    LogFormat(LogFormat),
    RedisEnabled(bool),
    QueuePrefix(&'static str),
    OtelEndpoint(Option<&'static str>),
    /// `OTEL_TRACES_SAMPLER` with its argument: the share of new traces kept and whether a caller's
    /// `traceparent` decides.
    TraceSampling {
        ratio: f64,
        follows_parent: bool,
    },
    /// Node only: the media bucket with `STORAGE_TYPE=s3`, `None` for local storage.
    S3Bucket(Option<&'static str>),
    /// Node only: the S3-compatible server, as a normalised URL.
    S3Endpoint(Option<&'static str>),
    /// Node only.
    S3ForcePathStyle(bool),
    /// Node only.
    BrowserWebUrl(&'static str),
    /// Node only.
    BenchAckOnReceipt(bool),
    /// Node only.
    BenchLocalLimiter(bool),
}

/// Settings `wagate` accepts for its media storage, its browser engine's page and the benchmark switches.
pub const NODE_ACCEPTED: &[Accepted] = &[
    Accepted {
        env: &[],
        expect: &[
            Expect::S3Bucket(None),
            Expect::BrowserWebUrl(crate::knobs::DEFAULT_BROWSER_WEB_URL),
            Expect::BenchAckOnReceipt(false),
            Expect::BenchLocalLimiter(false),
        ],
    },
    Accepted {
        env: &[
            ("STORAGE_TYPE", "local"),
            ("S3_BUCKET", "ignored-when-local"),
        ],
        expect: &[Expect::S3Bucket(None)],
    },
    Accepted {
        env: &[("STORAGE_TYPE", "s3"), ("S3_BUCKET", "wagate-media")],
        expect: &[
            Expect::S3Bucket(Some("wagate-media")),
            Expect::S3Endpoint(None),
            Expect::S3ForcePathStyle(false),
        ],
    },
    Accepted {
        env: &[
            ("STORAGE_TYPE", "s3"),
            ("S3_BUCKET", "wagate-media"),
            ("S3_REGION", "eu-west-1"),
            ("S3_ENDPOINT", "http://127.0.0.1:9000"),
            ("S3_FORCE_PATH_STYLE", "true"),
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "example-secret"),
        ],
        expect: &[
            Expect::S3Bucket(Some("wagate-media")),
            Expect::S3Endpoint(Some("http://127.0.0.1:9000/")),
            Expect::S3ForcePathStyle(true),
        ],
    },
    Accepted {
        env: &[("BROWSER_WEB_URL", "http://127.0.0.1:8080/")],
        expect: &[Expect::BrowserWebUrl("http://127.0.0.1:8080/")],
    },
    Accepted {
        env: &[(
            "NODE_URL",
            "http://wagate-0.wagate-peers.default.svc.cluster.local:2785",
        )],
        expect: &[],
    },
    Accepted {
        env: &[
            ("REDIS_ENABLED", "true"),
            ("NODE_URL", "https://node-a.example.com/"),
        ],
        expect: &[],
    },
    // Every node knob at the top of its kind's range boots (a concurrency of a million, windows and TTLs of
    // 2147483647 ms, a billion requests per window, 1 TiB byte sizes).
    Accepted {
        env: &[
            ("ENGINE_TYPE", "browser"),
            ("BROWSER_LAUNCH_CONCURRENCY", "1000000"),
            ("BROWSER_MAX_RSS_MB", "1048576"),
            ("SESSION_RESTORE_CONCURRENCY", "1000000"),
            ("SESSION_START_TIMEOUT_MS", "2147483647"),
            ("RATE_LIMIT_SHORT_TTL", "2147483647"),
            ("RATE_LIMIT_SHORT_LIMIT", "1000000000"),
            ("RATE_LIMIT_MEDIUM_TTL", "2147483647"),
            ("RATE_LIMIT_LONG_TTL", "2147483647"),
            ("RATE_LIMIT_LONG_LIMIT", "1000000000"),
            ("BODY_SIZE_LIMIT", "1048576mb"),
            ("MEDIA_DOWNLOAD_MAX_BYTES", "1099511627776"),
            ("MEDIA_CONVERSION_CONCURRENCY", "1000000"),
            ("MEDIA_CONVERSION_QUEUE", "1000000"),
            ("MEDIA_CONVERSION_MAX_OUTPUT_BYTES", "1099511627776"),
            ("EXPORT_INLINE_MEDIA_BUDGET_BYTES", "1099511627776"),
            ("STORAGE_EXPORT_TTL_MS", "2147483647"),
            ("SEND_PACING_DAILY_CAP", "1000000"),
            ("SEND_PACING_WARMUP_DAYS", "3650"),
            ("REDIS_ENABLED", "true"),
            ("SESSION_LEASE_TTL_MS", "2147483647"),
            ("RAFT_SNAPSHOT_LOGS", "1000000"),
        ],
        expect: &[],
    },
    Accepted {
        env: &[("MEDIA_CONVERSION_QUEUE", "0"), ("BROWSER_MAX_RSS_MB", "0")],
        expect: &[],
    },
    Accepted {
        env: &[
            ("WAGATE_BENCH_ACK_ON_RECEIPT", "true"),
            ("WAGATE_BENCH_LOCAL_LIMITER", "true"),
        ],
        expect: &[
            Expect::BenchAckOnReceipt(true),
            Expect::BenchLocalLimiter(true),
        ],
    },
];

/// Settings both binaries accept, with the same meaning.
pub const ACCEPTED: &[Accepted] = &[
    Accepted {
        env: &[],
        expect: &[
            Expect::DatabaseType(DatabaseType::Sqlite),
            Expect::DatabaseUrl("./data/wagate.sqlite"),
            Expect::WebhookTimeoutMs(10_000),
            Expect::OutboxStaleMs(60_000),
            Expect::LogLevel(LogLevel::Info),
            Expect::LogFormat(LogFormat::Text),
            Expect::RedisEnabled(false),
            Expect::QueuePrefix(""),
            Expect::OtelEndpoint(None),
            Expect::TraceSampling {
                ratio: 1.0,
                follows_parent: true,
            },
        ],
    },
    Accepted {
        env: &[
            ("DATABASE_TYPE", "postgresql"),
            ("DATABASE_URL", "postgres://db/wagate"),
        ],
        expect: &[
            Expect::DatabaseType(DatabaseType::Postgres),
            Expect::DatabaseUrl("postgres://db/wagate"),
        ],
    },
    Accepted {
        env: &[
            ("DATABASE_TYPE", "postgres"),
            ("DATABASE_URL", "postgres://db/wagate"),
        ],
        expect: &[Expect::DatabaseType(DatabaseType::Postgres)],
    },
    Accepted {
        env: &[("WEBHOOK_TIMEOUT", " 2500 "), ("OUTBOX_STALE_MS", "0")],
        expect: &[Expect::WebhookTimeoutMs(2_500), Expect::OutboxStaleMs(0)],
    },
    Accepted {
        env: &[
            ("WEBHOOK_TIMEOUT", "2147483647"),
            ("OUTBOX_STALE_MS", "2147483647"),
            ("WEBHOOK_DISPATCH_CONCURRENCY", "1000000"),
            ("WEBHOOK_MAX_PAYLOAD_BYTES", "1099511627776"),
            ("WEBHOOK_RETRY_DELAY", "0"),
        ],
        expect: &[
            Expect::WebhookTimeoutMs(2_147_483_647),
            Expect::OutboxStaleMs(2_147_483_647),
        ],
    },
    Accepted {
        env: &[("WEBHOOK_TIMEOUT", ""), ("LOG_LEVEL", "  ")],
        expect: &[
            Expect::WebhookTimeoutMs(10_000),
            Expect::LogLevel(LogLevel::Info),
        ],
    },
    Accepted {
        env: &[("LOG_LEVEL", "verbose"), ("LOG_FORMAT", "json")],
        expect: &[
            Expect::LogLevel(LogLevel::Verbose),
            Expect::LogFormat(LogFormat::Json),
        ],
    },
    Accepted {
        env: &[("REDIS_ENABLED", "true"), ("QUEUE_PREFIX", "blue-")],
        expect: &[Expect::RedisEnabled(true), Expect::QueuePrefix("blue-")],
    },
    Accepted {
        env: &[
            ("DATABASE_TYPE", "postgres"),
            (
                "DATABASE_URL",
                "postgresql://wagate:pw@db:5432/wagate?sslmode=require",
            ),
        ],
        expect: &[Expect::DatabaseUrl(
            "postgresql://wagate:pw@db:5432/wagate?sslmode=require",
        )],
    },
    Accepted {
        env: &[("DATABASE_URL", "/var/lib/wagate/data.sqlite")],
        expect: &[Expect::DatabaseUrl("/var/lib/wagate/data.sqlite")],
    },
    Accepted {
        env: &[("DATABASE_URL", "sqlite://data/wagate.sqlite?mode=rwc")],
        expect: &[Expect::DatabaseUrl("sqlite://data/wagate.sqlite?mode=rwc")],
    },
    Accepted {
        env: &[("BIND_HOST", "::")],
        expect: &[],
    },
    Accepted {
        env: &[("BIND_HOST", "[::1]")],
        expect: &[],
    },
    Accepted {
        env: &[("BIND_HOST", "localhost")],
        expect: &[],
    },
    Accepted {
        env: &[(
            "BIND_HOST",
            "wagate-api-0.wagate-peers.default.svc.cluster.local.",
        )],
        expect: &[],
    },
    Accepted {
        env: &[
            ("REDIS_ENABLED", "true"),
            ("REDIS_URL", "redis://:pw@wagate-redis:6379/2"),
        ],
        expect: &[Expect::RedisEnabled(true)],
    },
    Accepted {
        env: &[("REDIS_URL", "redis://[::1]:6380")],
        expect: &[],
    },
    Accepted {
        env: &[("REDIS_URL", "unix:///run/redis/redis.sock?db=1")],
        expect: &[],
    },
    Accepted {
        env: &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")],
        expect: &[Expect::OtelEndpoint(Some("http://127.0.0.1:4318"))],
    },
    Accepted {
        env: &[
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.1"),
        ],
        expect: &[Expect::TraceSampling {
            ratio: 0.1,
            follows_parent: true,
        }],
    },
    Accepted {
        env: &[
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", " 0 "),
        ],
        expect: &[Expect::TraceSampling {
            ratio: 0.0,
            follows_parent: false,
        }],
    },
    Accepted {
        env: &[("OTEL_TRACES_SAMPLER", "always_off")],
        expect: &[Expect::TraceSampling {
            ratio: 0.0,
            follows_parent: false,
        }],
    },
    Accepted {
        env: &[
            ("OTEL_TRACES_SAMPLER", "always_on"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
        ],
        expect: &[Expect::TraceSampling {
            ratio: 1.0,
            follows_parent: false,
        }],
    },
    Accepted {
        env: &[("OTEL_TRACES_SAMPLER_ARG", ".25")],
        expect: &[Expect::TraceSampling {
            ratio: 1.0,
            follows_parent: true,
        }],
    },
];

/// Runs every row of `rows` through a binary's own configuration loader (`load`, reading only the row's
/// variables) and checks each of its expectations with `holds`: `Some(true)` when the loaded configuration
/// holds the value, `None` when the binary does not read that knob (which fails the row).
pub fn check_loader<C>(
    rows: &[Accepted],
    load: impl Fn(&Source) -> Result<C, Stop>,
    holds: impl Fn(&C, &Expect) -> Option<bool>,
) -> Result<(), String> {
    for row in rows {
        let config = match load(&Source::from_pairs(row.env.iter().copied())) {
            Ok(config) => config,
            Err(Stop::Refused(e)) => return Err(format!("{:?}: refused: {e}", row.env)),
            Err(Stop::Show(_)) => return Err(format!("{:?}: showed help", row.env)),
        };
        for expect in row.expect {
            match holds(&config, expect) {
                Some(true) => {}
                Some(false) => return Err(format!("{:?}: loaded, but not {expect:?}", row.env)),
                None => return Err(format!("{:?}: {expect:?} is not a knob it reads", row.env)),
            }
        }
    }
    Ok(())
}

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
