//! The real `wagate-worker` against the shared table of refused values: the same line and exit code as
//! `wagate`, `--help` lists every knob, and nothing starts before either.

#[test]
fn the_worker_refuses_the_shared_table_and_prints_help() {
    let checked = wagate_config::cases::check_binary::<wagate_config::WorkerCli>(
        std::path::Path::new(env!("CARGO_BIN_EXE_wagate-worker")),
        &[],
    );
    if let Err(e) = checked {
        panic!("{e}");
    }
}
