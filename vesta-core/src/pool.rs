//! Machine-ID pools: in Vesta's layouts embedded issuers and servers draw from disjoint ranges of
//! the node field, so an embedded issuer and a server can never hold the same machine ID. The
//! split is Vesta's idea: the other layouts (the peers', custom ones) use the whole node field in
//! every mode ([`MachinePools::whole`]), as their own systems do, unless a split is configured
//! (`[machine] server_pool_start`).

use std::ops::RangeInclusive;

use crate::error::FieldError;
use crate::fields::GenMethod;
use crate::layout::{MACHINE_BITS, NODE_BITS};

/// Largest machine ID of Vesta's layouts (10 bits).
pub const MAX_MACHINE: u64 = (1 << MACHINE_BITS) - 1;

/// The pools of a node field's machine IDs: split (embed below `server_start`, servers from it
/// up) or whole (every ID for every mode; `server_start` is then only where a server's default
/// ID lies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MachinePools {
    node_bits: u32,
    server_start: u64,
    split: bool,
}

/// A machine ID that its genMethod may not use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// The machine ID lies outside the pool of the generator's genMethod.
    #[error(
        "machine {machine} is outside {} {}..={} (genMethod {gen_method})",
        pool_words(pool),
        range.start(),
        range.end()
    )]
    OutsidePool {
        /// The rejected machine ID.
        machine: u64,
        /// `embed`, `server`, or `any` (a whole node field).
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
            split: true,
        })
    }

    /// The whole `node_bits`-wide node field for every mode, as the peers' own systems use it
    /// (Leaf's workerIds, Sonyflake's machine IDs): no split. A server without a configured ID
    /// still defaults to the first ID of Vesta's share ([`default_machine`](Self::default_machine)),
    /// apart from an embedded issuer's default 0. Panics outside 5..=22 bits.
    pub fn whole(node_bits: u32) -> Self {
        MachinePools {
            split: false,
            ..Self::for_node_bits(node_bits)
        }
    }

    /// True when embedded issuers and servers draw from disjoint ranges.
    pub const fn is_split(&self) -> bool {
        self.split
    }

    /// The machine ID a static issuer of `gen_method` takes when none is configured: its pool's
    /// first; without a split, 0 for embedded issuers and the first of Vesta's share for
    /// servers, so that the two defaults never meet.
    pub fn default_machine(&self, gen_method: GenMethod) -> Result<u64, PoolError> {
        match gen_method {
            GenMethod::Reserved => Err(PoolError::ReservedGenMethod),
            GenMethod::Embed => Ok(0),
            GenMethod::Server | GenMethod::Rest => Ok(self.server_start),
        }
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
            split: true,
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

    /// Machine IDs for embedded issuers (genMethod embed): below the split, or all.
    pub const fn embed(&self) -> RangeInclusive<u64> {
        if self.split {
            0..=self.server_start - 1
        } else {
            0..=self.max_machine()
        }
    }

    /// Machine IDs for central servers (genMethod server and rest): from the split up, or all.
    pub const fn server(&self) -> RangeInclusive<u64> {
        if self.split {
            self.server_start..=self.max_machine()
        } else {
            0..=self.max_machine()
        }
    }

    /// The pool a genMethod draws from, with its name (`embed`, `server`, or `any` without a
    /// split).
    pub fn for_gen_method(
        &self,
        gen_method: GenMethod,
    ) -> Result<(&'static str, RangeInclusive<u64>), PoolError> {
        match gen_method {
            GenMethod::Reserved => Err(PoolError::ReservedGenMethod),
            _ if !self.split => Ok(("any", self.embed())),
            GenMethod::Embed => Ok(("embed", self.embed())),
            GenMethod::Server | GenMethod::Rest => Ok(("server", self.server())),
        }
    }

    /// The pool `machine` lies in, with its name (`embed`, `server`, or `any` without a split);
    /// `None` beyond the node field.
    pub fn pool_of(&self, machine: u64) -> Option<(&'static str, RangeInclusive<u64>)> {
        if !self.split {
            return (machine <= self.max_machine()).then(|| ("any", self.embed()));
        }
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
            split: true,
        }
    }
}

/// A pool's name in an error: `the embed pool`, or `the node field` for a whole one.
fn pool_words(pool: &str) -> String {
    match pool {
        "any" => "the node field".into(),
        other => format!("the {other} pool"),
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

    /// The peers' layouts have no pools: every ID in every mode; a server's default still sits
    /// apart from an embedded issuer's.
    #[test]
    fn a_whole_node_field_takes_every_id_in_every_mode() {
        let p = MachinePools::whole(10);
        assert!(!p.is_split());
        assert_eq!((p.embed(), p.server()), (0..=1023, 0..=1023));
        for method in [GenMethod::Embed, GenMethod::Server, GenMethod::Rest] {
            assert!(p.check(1023, method).is_ok());
            assert!(p.check(0, method).is_ok());
            assert_eq!(p.for_gen_method(method).unwrap().0, "any");
        }
        assert_eq!(p.default_machine(GenMethod::Embed), Ok(0));
        assert_eq!(p.default_machine(GenMethod::Rest), Ok(924));
        assert_eq!(p.pool_of(5), Some(("any", 0..=1023)));
        assert_eq!(p.pool_of(1024), None);
        assert_eq!(
            p.check(1024, GenMethod::Embed).unwrap_err().to_string(),
            "machine 1024 is outside the node field 0..=1023 (genMethod embed)"
        );
        let split = MachinePools::default();
        assert_eq!(split.default_machine(GenMethod::Embed), Ok(0));
        assert_eq!(split.default_machine(GenMethod::Server), Ok(924));
    }

    #[test]
    fn boundary_is_configurable_within_range() {
        assert_eq!(MachinePools::new(512).unwrap().server(), 512..=1023);
        assert!(MachinePools::new(0).is_err());
        assert!(MachinePools::new(1024).is_err());
    }
}
