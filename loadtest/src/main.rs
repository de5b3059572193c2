//! `wagate-loadtest`: drives a running node on the `sim` engine and prints figures. Scenarios are added by
//! the issues that own them; `reads` measures authenticated REST reads.

mod scenarios;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    scenarios::run(&args).await
}
