//! Harnesses for the cross-crate integration tests: the real `vesta` binary (built on demand, so
//! it is never stale) and, for the lease tests, real ZooKeeper servers on loopback ports.

pub mod bin;
pub mod zk;
