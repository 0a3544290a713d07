//! Commands and flags left out of this build: `cargo build -p vesta-cli --no-default-features`
//! makes the embedded issuer's commands alone (a first build in a fraction of the time). What
//! is left out still parses, and says in one line which feature brings it back.

use std::ffi::OsString;

/// A left-out command's arguments: anything, so that the refusal, not a parse error, answers.
#[derive(clap::Args, Debug)]
pub struct Absent {
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        hide = true,
        value_name = "ARGS"
    )]
    rest: Vec<OsString>,
}

/// The one line for `what` (a command or flag) built without `feature`.
pub fn refused(what: &str, feature: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{what} is not in this build of vesta (built without the `{feature}` feature): build it \
         with the default features (from the repository: `cargo install --path vesta-cli \
         --locked`)"
    )
}
