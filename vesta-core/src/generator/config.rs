//! What decides which IDs a generator may issue ([`GeneratorConfig`], checked by
//! [`GeneratorConfig::validate`] with errors naming the field), where its sequence starts
//! ([`SeqStart`]), and where issuing stands ([`Position`]).

use crate::error::FieldError;
use crate::fields::GenMethod;
use crate::layout::Layout;
use crate::pool::{MachinePools, PoolError};

/// Largest accepted clock-rollback tolerance: beyond a minute, waiting is the wrong remedy.
pub const MAX_ROLLBACK_TOLERANCE_MS: u64 = 60_000;

/// Where the sequence of each new time unit starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SeqStart {
    /// At 0, as Vesta does: the most IDs per unit.
    #[default]
    Zero,
    /// At a pseudo-random value in `[0, bound)`, so that at low traffic `id % k` still spreads
    /// over shards. Costs up to `bound - 1` sequence numbers per unit.
    Random {
        /// Exclusive upper bound, 1..=the layout's capacity per unit.
        bound: u64,
    },
}

/// Where issuing stands: the time and seq fields of the last ID issued under a machine ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The time field (units since the epoch).
    pub time: u64,
    /// The seq field.
    pub seq: u64,
}

/// Everything that decides which IDs a generator may issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratorConfig {
    /// The layout of the issued IDs, with its epoch (and, for Vesta, its version bit).
    pub layout: Layout,
    /// This issuer's machine (node) ID; must lie in the pool of `gen_method`.
    pub machine: u64,
    /// Recorded in each ID where the layout has a genMethod field; picks the machine-ID pool
    /// either way. `Reserved` cannot issue.
    pub gen_method: GenMethod,
    /// The embed/server split of machine IDs (`None`: the layout's default for its node width).
    pub pools: Option<MachinePools>,
    /// How far back the clock may step before issuing fails (`None`: the type's default).
    pub rollback_tolerance_ms: Option<u64>,
    /// Where each unit's sequence starts.
    pub seq_start: SeqStart,
    /// A high-water mark: no ID with a time at or below it is issued (e.g. the last time this
    /// machine ID issued, from a lease). `None` for a fresh machine ID; time 0 (the epoch's
    /// first unit) is never issued either way.
    pub floor: Option<u64>,
}

impl GeneratorConfig {
    /// A config for `layout` with machine 0 and everything else at its default.
    pub fn for_layout(layout: Layout) -> Self {
        GeneratorConfig {
            layout,
            ..Default::default()
        }
    }

    /// The tolerance in force: the configured one, else one unit and at least 5 ms.
    pub fn rollback_tolerance_ms(&self) -> u64 {
        self.rollback_tolerance_ms
            .unwrap_or(self.layout.default_rollback_tolerance_ms())
    }

    /// The machine-ID pools in force: the configured split, else the layout's default.
    pub fn pools(&self) -> MachinePools {
        self.pools.unwrap_or_else(|| self.layout.default_pools())
    }

    /// Checks every value as [`Generator::new`](crate::Generator::new) does, without a clock: pools that split the
    /// layout's node width, the machine ID in its pool, a tolerance of at most
    /// [`MAX_ROLLBACK_TOLERANCE_MS`], a random sequence start within a unit's capacity and a
    /// floor within the layout. Errors name the field and its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let layout = &self.layout;
        let pools = self.pools();
        if pools.node_bits() != layout.node_bits() {
            return Err(ConfigError::PoolWidth {
                pools: pools.node_bits(),
                layout: layout.node_bits(),
                name: layout.full_name(),
            });
        }
        pools.check(self.machine, self.gen_method)?;
        let tolerance_ms = self.rollback_tolerance_ms();
        if tolerance_ms > MAX_ROLLBACK_TOLERANCE_MS {
            return Err(FieldError::out_of_range(
                "rollback_tolerance_ms",
                tolerance_ms,
                0,
                MAX_ROLLBACK_TOLERANCE_MS,
            )
            .into());
        }
        let bound = match self.seq_start {
            SeqStart::Zero => 1,
            SeqStart::Random { bound } => bound,
        };
        if !(1..=layout.capacity_per_unit()).contains(&bound) {
            return Err(FieldError::out_of_range(
                "seq_start_random_bound",
                bound,
                1,
                layout.capacity_per_unit(),
            )
            .into());
        }
        let floor = self.floor.unwrap_or(0);
        if floor > layout.max_time() {
            return Err(FieldError::out_of_range("floor", floor, 0, layout.max_time()).into());
        }
        Ok(())
    }
}

impl Default for GeneratorConfig {
    /// Vesta's max-peak layout and epoch, machine 0, genMethod embed.
    fn default() -> Self {
        GeneratorConfig {
            layout: Layout::default(),
            machine: 0,
            gen_method: GenMethod::Embed,
            pools: None,
            rollback_tolerance_ms: None,
            seq_start: SeqStart::Zero,
            floor: None,
        }
    }
}

/// A configuration the generator refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A field value out of range.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// The machine ID is outside its genMethod's pool.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// The pools split a node field of another width than the layout's.
    #[error(
        "the machine pools split a {pools}-bit node field but the {name} layout's node field has \
         {layout} bits"
    )]
    PoolWidth {
        /// Width the pools split.
        pools: u32,
        /// Width of the layout's node field.
        layout: u32,
        /// The layout.
        name: String,
    },
}
