//! One module per subcommand, plus the arguments they share.

pub mod bench;
pub mod bench_rest;
pub mod bench_tcp;
pub mod common;
pub mod docs;
pub mod explain;
pub mod gen_server;
pub mod generate;
pub mod layout;
pub mod machine;
pub mod make;
pub mod segment;
pub mod serve;
pub mod zk;
