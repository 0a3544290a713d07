//! Nothing to build: the build dependencies are there for their features (Cargo.toml).

fn main() {}
