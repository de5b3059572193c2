//! `wagate-loadtest`: drives a running node or cluster on the `sim` engine (or nodes it starts itself) and
//! prints figures: throughput, latency percentiles, errors, lost and duplicated webhook events, and the RSS
//! of the processes it started. `--help` on the tool and on each scenario lists every flag.

mod scenarios;

use std::process::ExitCode;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "wagate-loadtest",
    version,
    about = "Load scenarios against wagate on the sim engine",
    long_about = "Load scenarios against wagate on the sim engine. Each scenario targets a running node with \
                  --url/--key, or starts its own node from --binary (default: `wagate` beside this \
                  executable). Progress goes to stderr once a second; the result goes to stdout as text or, \
                  with --json, as one JSON object. Exit status: 0 done, 1 the run failed (e.g. the target \
                  does not answer), 2 bad arguments."
)]
struct Cli {
    /// Print the result as one JSON object on stdout instead of text
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    scenario: scenarios::Scenario,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("wagate-loadtest: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli.scenario.run()) {
        Ok(report) => {
            if cli.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => println!("{text}"),
                    Err(err) => {
                        eprintln!("wagate-loadtest: {err}");
                        return ExitCode::FAILURE;
                    }
                }
            } else {
                print!("{}", report.render_text());
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("wagate-loadtest: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("wagate-loadtest").chain(args.iter().copied()))
    }

    fn rendered(err: clap::Error) -> String {
        err.render().to_string()
    }

    #[test]
    fn an_unknown_flag_is_an_error_naming_it() {
        let err = parse(&["sends", "--cuont", "5"]).expect_err("unknown flag");
        assert_eq!(err.kind(), ErrorKind::UnknownArgument);
        assert!(rendered(err).contains("--cuont"));
    }

    #[test]
    fn a_bad_value_is_an_error_naming_the_flag() {
        for (args, flag) in [
            (&["sends", "--count", "abc"][..], "--count"),
            (&["reads", "--seconds", "0"][..], "--seconds"),
            (&["bulk", "--batch-size", "101"][..], "--batch-size"),
            (&["bulk", "--delay-ms", "999"][..], "--delay-ms"),
            (&["reads", "--url", "127.0.0.1:2785"][..], "--url"),
            (
                &["inbound-storm", "--node-env", "NOEQUALS"][..],
                "--node-env",
            ),
            (&["node-kill", "--nodes", "1"][..], "--nodes"),
        ] {
            let err = parse(args).expect_err("bad value");
            assert_eq!(err.kind(), ErrorKind::ValueValidation, "{args:?}");
            assert!(rendered(err).contains(flag), "{args:?} should name {flag}");
        }
    }

    #[test]
    fn no_scenario_or_an_unknown_one_is_an_error() {
        let missing = parse(&[]).expect_err("no scenario");
        assert_eq!(
            missing.kind(),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
        assert!(missing.exit_code() != 0);
        let unknown = parse(&["raeds"]).expect_err("unknown scenario");
        assert_eq!(unknown.kind(), ErrorKind::InvalidSubcommand);
        assert!(rendered(unknown).contains("raeds"));
    }

    #[test]
    fn flags_parse_with_their_defaults() {
        let cli = parse(&["--json", "sends", "--rate", "500"]).expect("valid");
        assert!(cli.json);
        let scenarios::Scenario::Sends(a) = cli.scenario else {
            panic!("sends expected");
        };
        assert_eq!(
            (a.rate, a.seconds, a.count, a.concurrency),
            (500, 10, 3000, 32)
        );
        let cli = parse(&["reads", "--url", "http://127.0.0.1:9/", "--json"]).expect("valid");
        let scenarios::Scenario::Reads(a) = cli.scenario else {
            panic!("reads expected");
        };
        assert_eq!(a.target.url.as_deref(), Some("http://127.0.0.1:9"));
        assert!(cli.json);
    }

    #[test]
    fn every_flag_has_help() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        for sub in cmd.get_subcommands() {
            assert!(sub.get_about().is_some(), "{} has no help", sub.get_name());
            for arg in sub.get_arguments() {
                assert!(
                    arg.get_help().is_some(),
                    "{} --{} has no help",
                    sub.get_name(),
                    arg.get_id()
                );
            }
        }
    }
}
