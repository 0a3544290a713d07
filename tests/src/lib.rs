//! Harnesses for the cross-crate integration tests: the real `vesta` binary (built on demand, so
//! it is never stale) and, for the lease tests, real ZooKeeper servers on loopback ports.

pub mod bin;
pub mod zk;

/// The README's Rust snippets ("Use it as a library"), compiled and run as doctests so that
/// what a new user copies works.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
