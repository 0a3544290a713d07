//! `vesta serve`: run the central TCP server or the REST server.

/// Arguments of `vesta serve`.
#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// The central TCP issuer (genMethod server, machine ID from the server pool).
    Tcp(super::serve_tcp::Args),
    /// The REST issuer (genMethod rest, machine ID from the server pool).
    Rest(super::serve_rest::Args),
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args {
        Args::Tcp(a) => super::serve_tcp::run(a),
        Args::Rest(a) => super::serve_rest::run(a),
    }
}
