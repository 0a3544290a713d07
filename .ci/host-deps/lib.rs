//! Nothing: the package exists for its build dependencies' features (Cargo.toml).
