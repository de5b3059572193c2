//! Scenario dispatch: `wagate-loadtest <scenario> [options]`.

mod reads;

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    match args.first().map(String::as_str) {
        Some("reads") => reads::run(&args[1..]).await,
        _ => {
            eprintln!(
                "usage: wagate-loadtest reads [--url URL] [--key KEY] [--seconds N] [--connections N]"
            );
            Ok(())
        }
    }
}
