//! One module per subcommand, plus the arguments they share.

pub mod bench;
pub mod common;
pub mod explain;
pub mod generate;
pub mod layout;
pub mod make;
pub mod serve;
pub mod serve_rest;
pub mod serve_tcp;
pub mod zk;
