//! The `wagate` binary: read the configuration, refuse bad values in one line, then run the node.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let config = match wagate_node::config::Config::from_env() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    match wagate_node::run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("wagate failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}
