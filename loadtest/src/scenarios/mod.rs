//! Scenario dispatch: `wagate-loadtest <scenario> [options]`.

mod cluster;
mod events;
mod limiter;
mod reads;
mod sessions;
mod socket_sessions;

/// The value after `name` in the arguments, or `default`.
pub(crate) fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    match args.first().map(String::as_str) {
        Some("reads") => reads::run(&args[1..]).await,
        Some("sessions") => sessions::run(&args[1..]).await,
        Some("socket-sessions") => socket_sessions::run(&args[1..]).await,
        Some("sends") => events::sends(&args[1..]).await,
        Some("inbound-storm") => events::inbound_storm(&args[1..]).await,
        Some("cluster") => cluster::run(&args[1..]).await,
        Some("limiter") => limiter::run(&args[1..]).await,
        _ => {
            eprintln!(
                "usage: wagate-loadtest reads [--url URL] [--key KEY] [--seconds N] [--connections N]\n       wagate-loadtest sessions [--binary PATH] [--count N] [--concurrency N]\n       wagate-loadtest socket-sessions [--binary PATH] [--count N] [--concurrency N] [--settle-secs S]\n       wagate-loadtest sends [--binary PATH] [--count N] [--concurrency N] [--rate R --seconds T] [--dump CSV]\n       wagate-loadtest inbound-storm [--binary PATH] [--sessions S] [--rate R] [--seconds T]\n       wagate-loadtest cluster [--binary PATH] [--worker PATH] [--sessions N] [--seconds T] [--concurrency C] [--ttl-ms MS] [--heartbeat-ms MS] [--sweep-ms MS] [--restore-concurrency N]\n       wagate-loadtest limiter [--binary PATH] [--seconds N] [--connections N] [--path PATH]"
            );
            Ok(())
        }
    }
}
