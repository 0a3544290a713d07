//! PLACEHOLDER: `vesta serve tcp` — being built; must be replaced before landing.

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("PLACEHOLDER: not built yet")
}
