//! PLACEHOLDER: `vesta bench` — load tools; being built, must be replaced before landing.

/// Arguments of `vesta bench`.
#[derive(clap::Subcommand, Debug)]
pub enum Args {}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args {}
}
