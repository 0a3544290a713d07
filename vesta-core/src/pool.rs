//! Machine-ID pools: embedded issuers and servers draw from disjoint ranges, so an embedded
//! issuer and a server can never hold the same machine ID.

use std::ops::RangeInclusive;

use crate::error::FieldError;
use crate::fields::GenMethod;
use crate::layout::MACHINE_BITS;

/// Largest machine ID.
pub const MAX_MACHINE: u64 = (1 << MACHINE_BITS) - 1;

/// The split of machine IDs 0..=1023: embed below `server_start`, servers from it up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MachinePools {
    server_start: u64,
}

/// A machine ID that its genMethod may not use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The machine ID lies outside the pool of the generator's genMethod.
    #[error("machine {machine} is outside the {pool} pool {}..={} (genMethod {gen_method})", range.start(), range.end())]
    OutsidePool {
        /// The rejected machine ID.
        machine: u64,
        /// `embed` or `server`.
        pool: &'static str,
        /// The pool's IDs.
        range: RangeInclusive<u64>,
        /// The genMethod asking.
        gen_method: GenMethod,
    },
    /// genMethod 3 is reserved and issues nothing.
    #[error("genMethod reserved (3) cannot issue IDs: use embed, server or rest")]
    ReservedGenMethod,
}

impl MachinePools {
    /// Vesta's split: 0..=923 embedded, 924..=1023 servers.
    pub const DEFAULT_SERVER_START: u64 = 924;

    /// A split with servers from `server_start` up; both pools must keep at least one ID.
    pub fn new(server_start: u64) -> Result<Self, FieldError> {
        if !(1..=MAX_MACHINE).contains(&server_start) {
            return Err(FieldError::OutOfRange {
                field: "server_pool_start",
                value: server_start,
                min: 1,
                max: MAX_MACHINE,
                context: "",
            });
        }
        Ok(MachinePools { server_start })
    }

    /// First machine ID of the server pool.
    pub const fn server_start(&self) -> u64 {
        self.server_start
    }

    /// Machine IDs for embedded issuers (genMethod embed).
    pub const fn embed(&self) -> RangeInclusive<u64> {
        0..=self.server_start - 1
    }

    /// Machine IDs for central servers (genMethod server and rest).
    pub const fn server(&self) -> RangeInclusive<u64> {
        self.server_start..=MAX_MACHINE
    }

    /// The pool a genMethod draws from, with its name.
    pub fn for_gen_method(
        &self,
        gen_method: GenMethod,
    ) -> Result<(&'static str, RangeInclusive<u64>), PoolError> {
        match gen_method {
            GenMethod::Embed => Ok(("embed", self.embed())),
            GenMethod::Server | GenMethod::Rest => Ok(("server", self.server())),
            GenMethod::Reserved => Err(PoolError::ReservedGenMethod),
        }
    }

    /// Accepts `machine` only if it lies in the pool of `gen_method`.
    pub fn check(&self, machine: u64, gen_method: GenMethod) -> Result<(), PoolError> {
        let (pool, range) = self.for_gen_method(gen_method)?;
        if range.contains(&machine) {
            Ok(())
        } else {
            Err(PoolError::OutsidePool {
                machine,
                pool,
                range,
                gen_method,
            })
        }
    }
}

impl Default for MachinePools {
    fn default() -> Self {
        MachinePools {
            server_start: Self::DEFAULT_SERVER_START,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_split_is_vestas() {
        let p = MachinePools::default();
        assert_eq!(p.embed(), 0..=923);
        assert_eq!(p.server(), 924..=1023);
        assert!(p.check(923, GenMethod::Embed).is_ok());
        assert!(p.check(924, GenMethod::Rest).is_ok());
        let err = p.check(924, GenMethod::Embed).unwrap_err().to_string();
        assert_eq!(
            err,
            "machine 924 is outside the embed pool 0..=923 (genMethod embed)"
        );
        assert!(p.check(5, GenMethod::Server).is_err());
        assert_eq!(
            p.check(5, GenMethod::Reserved),
            Err(PoolError::ReservedGenMethod)
        );
    }

    #[test]
    fn boundary_is_configurable_within_range() {
        assert_eq!(MachinePools::new(512).unwrap().server(), 512..=1023);
        assert!(MachinePools::new(0).is_err());
        assert!(MachinePools::new(1024).is_err());
    }
}
