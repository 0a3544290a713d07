//! Machine-ID pools: embedded issuers and servers draw from disjoint ranges of the node field,
//! so an embedded issuer and a server can never hold the same machine ID. Layouts without a
//! genMethod field (the peers') tell a server's ID from an embedded one only by this split.

use std::ops::RangeInclusive;

use crate::error::FieldError;
use crate::fields::GenMethod;
use crate::layout::{MACHINE_BITS, NODE_BITS};

/// Largest machine ID of Vesta's layouts (10 bits).
pub const MAX_MACHINE: u64 = (1 << MACHINE_BITS) - 1;

/// The split of a node field's machine IDs: embed below `server_start`, servers from it up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MachinePools {
    node_bits: u32,
    server_start: u64,
}

/// A machine ID that its genMethod may not use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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

    /// A split of Vesta's 10-bit machine IDs with servers from `server_start` up; both pools
    /// must keep at least one ID.
    pub fn new(server_start: u64) -> Result<Self, FieldError> {
        Self::with_node_bits(MACHINE_BITS, server_start)
    }

    /// A split of a `node_bits`-wide node field with servers from `server_start` up.
    pub fn with_node_bits(node_bits: u32, server_start: u64) -> Result<Self, FieldError> {
        if !NODE_BITS.contains(&node_bits) {
            return Err(FieldError::out_of_range(
                "node bits",
                node_bits.into(),
                (*NODE_BITS.start()).into(),
                (*NODE_BITS.end()).into(),
            ));
        }
        let max = (1u64 << node_bits) - 1;
        if !(1..=max).contains(&server_start) {
            return Err(FieldError::out_of_range(
                "server_pool_start",
                server_start,
                1,
                max,
            ));
        }
        Ok(MachinePools {
            node_bits,
            server_start,
        })
    }

    /// The default split of a `node_bits`-wide node field: servers get the top
    /// `max(1, 2^bits × 100 / 1024)` IDs, Vesta's share (100 of 1024). 5 bits: 29..=31;
    /// 8: 231..=255; 10: 924..=1023; 12: 3696..=4095; 16: 59136..=65535;
    /// 22: 3784704..=4194303. Panics outside 5..=22 bits (a layout never has such a node).
    pub fn for_node_bits(node_bits: u32) -> Self {
        assert!(NODE_BITS.contains(&node_bits), "node bits {node_bits}");
        let ids = 1u64 << node_bits;
        let servers = (ids * 100 / 1024).max(1);
        MachinePools {
            node_bits,
            server_start: ids - servers,
        }
    }

    /// Width of the node field the pools split.
    pub const fn node_bits(&self) -> u32 {
        self.node_bits
    }

    /// Largest machine ID.
    pub const fn max_machine(&self) -> u64 {
        (1 << self.node_bits) - 1
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
        self.server_start..=self.max_machine()
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

    /// The pool `machine` lies in, with its name (`embed` or `server`); `None` beyond the node
    /// field.
    pub fn pool_of(&self, machine: u64) -> Option<(&'static str, RangeInclusive<u64>)> {
        [("embed", self.embed()), ("server", self.server())]
            .into_iter()
            .find(|(_, range)| range.contains(&machine))
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
    /// Vesta's split of 10-bit machine IDs.
    fn default() -> Self {
        MachinePools {
            node_bits: MACHINE_BITS,
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
    fn default_splits_give_servers_vestas_share_of_every_width() {
        let server = |bits| MachinePools::for_node_bits(bits).server();
        assert_eq!(MachinePools::for_node_bits(10), MachinePools::default());
        assert_eq!(server(5), 29..=31);
        assert_eq!(server(8), 231..=255);
        assert_eq!(server(12), 3696..=4095);
        assert_eq!(server(16), 59136..=65535);
        assert_eq!(server(22), 3_784_704..=4_194_303);
        let err = MachinePools::with_node_bits(16, 65536)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "server_pool_start 65536 is out of range: allowed 1..=65535"
        );
        assert!(MachinePools::with_node_bits(4, 3).is_err());
    }

    #[test]
    fn boundary_is_configurable_within_range() {
        assert_eq!(MachinePools::new(512).unwrap().server(), 512..=1023);
        assert!(MachinePools::new(0).is_err());
        assert!(MachinePools::new(1024).is_err());
    }
}
