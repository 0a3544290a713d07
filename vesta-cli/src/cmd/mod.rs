//! One module per subcommand, plus the arguments they share.

pub mod common;
pub mod explain;
pub mod generate;
pub mod layout;
pub mod make;
