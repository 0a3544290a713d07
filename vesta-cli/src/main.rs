//! `vesta`: explain, make and issue vesta-rs IDs from the command line, and run the servers.
//!
//! A thin layer over the libraries. Every failure ends as one line on stderr and a non-zero
//! exit status; no input makes it panic. The libraries name what an operator can do as data;
//! this binary alone spells it as a command line (`remedy`).

// Doc comments on the clap arguments are help text, where `[default: ...]` and `USER[:PASS]`
// mean what they mean in a usage line, not intra-doc links.
#![allow(rustdoc::broken_intra_doc_links)]

mod cmd;
#[cfg(feature = "serve")]
mod notify;
mod output;
mod remedy;
mod version;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Unique, time-ordered, explainable 64-bit IDs (Vesta-compatible).
#[derive(Parser)]
#[command(name = "vesta", version, about, propagate_version = false)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Explain IDs: their fields, type, genMethod, timestamp and layout.
    Explain(cmd::explain::Args),
    /// Make an ID from chosen fields (to repair data) and print it.
    Make(cmd::make::Args),
    /// Issue IDs from an in-process issuer and print one per line.
    ///
    /// Safe on one host: a static machine ID keeps its mark in a state file (the config's
    /// [machine] state_file, else the user's own in $XDG_STATE_HOME/vesta, default
    /// ~/.local/state/vesta), locked and held on the host for the run. Parallel runs take turns
    /// (each waits at most 10 s); a run after a clean one continues from its last ID at once,
    /// after a crash it first waits out what the ID may have issued. Across hosts a static ID is
    /// not safe by itself: lease it (--zk, --etcd, --machine-db), register it there (--machine N
    /// with one of them), or use --server.
    Gen(cmd::generate::Args),
    /// Show both bit layouts, their capacity, epoch and end of life.
    Layout(cmd::layout::Args),
    /// Run a server.
    #[cfg(feature = "serve")]
    #[command(subcommand)]
    Serve(cmd::serve::Args),
    /// Run a server (not in this build: needs the `serve` feature).
    #[cfg(not(feature = "serve"))]
    Serve(cmd::absent::Absent),
    /// Inspect machine-ID leases in ZooKeeper.
    #[cfg(feature = "leases")]
    #[command(subcommand)]
    Zk(cmd::zk::Args),
    /// Inspect machine-ID leases in ZooKeeper (not in this build: needs the `leases` feature).
    #[cfg(not(feature = "leases"))]
    Zk(cmd::absent::Absent),
    /// Inspect machine-ID leases (SQL, etcd, ZooKeeper); retire a mark after a layout or epoch
    /// change.
    #[command(subcommand)]
    Machine(cmd::machine::Args),
    /// Leaf-style segment numbers: dense, increasing numbers per tag from a database table.
    #[cfg(feature = "segment")]
    #[command(subcommand)]
    Segment(cmd::segment::Args),
    /// Leaf-style segment numbers (not in this build: needs the `segment` feature).
    #[cfg(not(feature = "segment"))]
    Segment(cmd::absent::Absent),
    /// Per-key sequences (WeChat seqsvr's model): a number per key that only goes up.
    #[cfg(feature = "seq")]
    #[command(subcommand)]
    Seq(cmd::seq::Args),
    /// Per-key sequences (not in this build: needs the `seq` feature).
    #[cfg(not(feature = "seq"))]
    Seq(cmd::absent::Absent),
    /// Load-test a running server.
    #[cfg(feature = "bench")]
    #[command(subcommand)]
    Bench(cmd::bench::Args),
    /// Load-test a running server (not in this build: needs the `bench` feature).
    #[cfg(not(feature = "bench"))]
    Bench(cmd::absent::Absent),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(cmd::docs::CompletionsArgs),
    /// Write the man pages (one per command) into a directory.
    Man(cmd::docs::ManArgs),
}

/// The clap command tree with the version lines (commit, defaults) filled in: what the binary
/// parses with, and what completions and man pages are generated from.
fn command() -> clap::Command {
    Cli::command()
        .version(version::short())
        .long_version(version::long())
}

fn main() -> ExitCode {
    // Before anything can fail: every remedy this process names is said as its command line.
    remedy::install();
    let parsed = command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => return output::clap_error(e),
    };
    let result = match cli.command {
        Command::Explain(args) => cmd::explain::run(args),
        Command::Make(args) => cmd::make::run(args),
        Command::Gen(args) => cmd::generate::run(args),
        Command::Layout(args) => cmd::layout::run(args),
        #[cfg(feature = "serve")]
        Command::Serve(args) => cmd::serve::run(args),
        #[cfg(not(feature = "serve"))]
        Command::Serve(_) => Err(cmd::absent::refused("vesta serve", "serve")),
        #[cfg(feature = "leases")]
        Command::Zk(args) => cmd::zk::run(args),
        #[cfg(not(feature = "leases"))]
        Command::Zk(_) => Err(cmd::absent::refused("vesta zk", "leases")),
        Command::Machine(args) => cmd::machine::run(args),
        #[cfg(feature = "segment")]
        Command::Segment(args) => cmd::segment::run(args),
        #[cfg(not(feature = "segment"))]
        Command::Segment(_) => Err(cmd::absent::refused("vesta segment", "segment")),
        #[cfg(feature = "seq")]
        Command::Seq(args) => cmd::seq::run(args),
        #[cfg(not(feature = "seq"))]
        Command::Seq(_) => Err(cmd::absent::refused("vesta seq", "seq")),
        #[cfg(feature = "bench")]
        Command::Bench(args) => cmd::bench::run(args),
        #[cfg(not(feature = "bench"))]
        Command::Bench(_) => Err(cmd::absent::refused("vesta bench", "bench")),
        Command::Completions(args) => cmd::docs::completions(args, command()),
        Command::Man(args) => cmd::docs::man(args, command()),
    };
    output::finish(result)
}
