//! Harnesses for the cross-crate integration tests: the real `vesta` binary (built on demand, so
//! it is never stale) and, for the lease tests, real ZooKeeper servers on loopback ports. Also
//! the building blocks of `scripts/soak` ([`soak`]), whose binaries live in `src/bin/`.

pub mod bin;
pub mod soak;
pub mod zk;
