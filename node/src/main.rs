//! The `wagate` binary: read the configuration (command line, environment, `.env`), print `--help` or refuse a
//! bad value in one line before anything starts, then run the node.

use std::process::ExitCode;

use wagate_node::config::{Config, Source, Stop};

#[global_allocator]
static ALLOCATOR: wagate_workers::allocator::Allocator = wagate_workers::allocator::Allocator;

#[tokio::main]
async fn main() -> ExitCode {
    wagate_workers::allocator::tune();
    let loaded = Source::process()
        .map_err(Stop::from)
        .and_then(|source| Config::load(std::env::args_os(), &source));
    let config = match loaded {
        Ok(config) => config,
        Err(stop) => return stop.exit(),
    };
    match wagate_node::run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("wagate failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}
