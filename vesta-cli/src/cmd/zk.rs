//! PLACEHOLDER: `vesta zk` — lease inspection; being built, must be replaced before landing.

/// Arguments of `vesta zk`.
#[derive(clap::Subcommand, Debug)]
pub enum Args {}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args {}
}
