//! The lock-free generator: one `AtomicU64` holds the last issued ID's low 60 bits (time, seq and
//! machine, exactly as they sit in the ID), and every ID or batch is one compare-and-swap on it.
//!
//! Both layouts spend exactly 60 bits on time + seq + machine, so the state word *is* the ID
//! without its header. Because it only ever moves forward, no interleaving of threads, clock
//! jumps or sequence overflows can hand out the same ID twice, and switching to a newly leased
//! machine ID is the same single atomic step. The rare paths (waiting for the next unit, clock
//! behind, fencing) sit in cold functions off the hot path.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::Clock;
use crate::epoch::Epoch;
use crate::error::{FieldError, GenError};
use crate::fields::{GenMethod, IdFields};
use crate::layout::{IdType, Layout, MACHINE_BITS};
use crate::pool::{MachinePools, PoolError};

const MACHINE_MASK: u64 = (1 << MACHINE_BITS) - 1;

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

/// Everything that decides which IDs a generator may issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GeneratorConfig {
    /// The layout of the issued IDs.
    pub id_type: IdType,
    /// Time zero of the time field.
    pub epoch: Epoch,
    /// This issuer's machine ID; must lie in the pool of `gen_method`.
    pub machine: u64,
    /// Recorded in each ID; picks the machine-ID pool. `Reserved` cannot issue.
    pub gen_method: GenMethod,
    /// Recorded in each ID: 0 default, 1 extension.
    pub version: u8,
    /// The embed/server split of machine IDs.
    pub pools: MachinePools,
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
    /// The default rollback tolerance: a few ms for min-granularity, one unit for max-peak.
    pub const fn default_rollback_tolerance_ms(id_type: IdType) -> u64 {
        match id_type {
            IdType::MaxPeak => 1000,
            IdType::MinGranularity => 5,
        }
    }

    /// The tolerance in force.
    pub fn rollback_tolerance_ms(&self) -> u64 {
        self.rollback_tolerance_ms
            .unwrap_or(Self::default_rollback_tolerance_ms(self.id_type))
    }

    /// Checks every value as [`Generator::new`] does, without a clock: the machine ID in its
    /// pool, version 0 or 1, a tolerance of at most [`MAX_ROLLBACK_TOLERANCE_MS`], a random
    /// sequence start within a unit's capacity and a floor within the layout. Errors name the
    /// field and its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let layout = self.id_type.layout();
        self.pools.check(self.machine, self.gen_method)?;
        self.header()?;
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

    /// Version, type and genMethod bits of every ID (the machine range-checked too).
    fn header(&self) -> Result<u64, FieldError> {
        let header = IdFields {
            version: self.version,
            id_type: self.id_type,
            gen_method: self.gen_method,
            time: 0,
            seq: 0,
            machine: self.machine,
        };
        Ok(header.encode()? & !((1 << 60) - 1))
    }
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            id_type: IdType::MaxPeak,
            epoch: Epoch::VESTA,
            machine: 0,
            gen_method: GenMethod::Embed,
            version: 0,
            pools: MachinePools::default(),
            rollback_tolerance_ms: None,
            seq_start: SeqStart::Zero,
            floor: None,
        }
    }
}

/// A configuration the generator refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A field value out of range.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// The machine ID is outside its genMethod's pool.
    #[error(transparent)]
    Pool(#[from] PoolError),
}

/// Counters of the rare events, for status pages and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GeneratorStats {
    /// Clock steps backwards seen and ridden out within the tolerance (one per issued unit).
    pub clock_rollbacks: u64,
    /// Calls refused because the clock was behind by more than the tolerance.
    pub clock_rollback_refusals: u64,
    /// Times a caller waited for the next unit because the sequence was used up.
    pub overflow_waits: u64,
}

#[derive(Default)]
struct Counters {
    clock_rollbacks: AtomicU64,
    clock_rollback_refusals: AtomicU64,
    overflow_waits: AtomicU64,
    last_rollback_time: AtomicU64,
}

/// The state word on a cache line of its own, away from the read-mostly fields.
#[repr(align(64))]
struct StateCell(AtomicU64);

/// A run of IDs with consecutive sequence numbers in one time unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IdRun {
    /// The first ID.
    pub first: u64,
    /// How many IDs; the k-th is `first + k * IdRun::STEP`.
    pub count: u64,
}

impl IdRun {
    /// The distance between IDs whose sequence numbers differ by one.
    pub const STEP: u64 = 1 << MACHINE_BITS;

    /// The k-th ID of the run, if k < count.
    pub fn get(&self, k: u64) -> Option<u64> {
        (k < self.count).then(|| self.first + k * Self::STEP)
    }

    /// The IDs of the run, in increasing order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u64> + use<> {
        let first = self.first;
        (0..self.count as usize).map(move |k| first + k as u64 * Self::STEP)
    }
}

/// IDs handed out by one batch call: contiguous runs, increasing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdBatch {
    runs: Vec<IdRun>,
    len: u64,
}

impl IdBatch {
    /// A batch of the given runs (e.g. decoded from a server's answer).
    pub fn from_runs(runs: Vec<IdRun>) -> Self {
        let len = runs.iter().map(|r| r.count).sum();
        IdBatch { runs, len }
    }

    /// The number of IDs.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if the batch holds no ID.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The runs, in increasing order.
    pub fn runs(&self) -> &[IdRun] {
        &self.runs
    }

    /// Every ID, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().flat_map(IdRun::iter)
    }

    /// Every ID in a vector.
    pub fn to_vec(&self) -> Vec<u64> {
        let mut v = Vec::with_capacity(self.len as usize);
        v.extend(self.iter());
        v
    }
}

/// Issues unique, time-ordered IDs for one machine ID. `Sync`: share it by reference or `Arc`.
pub struct Generator<C> {
    /// Time, seq and machine of the last issued ID, as bits 0-59 of it.
    state: StateCell,
    /// Version, type and genMethod bits: every ID is `header | state`.
    header: u64,
    /// Issuing stops when the clock reads this or later (ms since the Unix epoch).
    deadline_ms: AtomicU64,
    layout: &'static Layout,
    epoch_ms: u64,
    tolerance_ms: u64,
    /// Exclusive bound of a random sequence start; 0 for `SeqStart::Zero`.
    random_bound: u64,
    config: GeneratorConfig,
    counters: Counters,
    clock: C,
}

impl<C: Clock> Generator<C> {
    /// A generator for `config`, reading time from `clock`. Rejects a machine ID outside its
    /// pool, a version above 1, a tolerance above a minute or a floor past the layout's end.
    pub fn new(config: GeneratorConfig, clock: C) -> Result<Self, ConfigError> {
        config.validate()?;
        let layout = config.id_type.layout();
        let header = config.header()?;
        let tolerance_ms = config.rollback_tolerance_ms();
        let random_bound = match config.seq_start {
            SeqStart::Zero => 0,
            SeqStart::Random { bound } => bound,
        };
        let floor = config.floor.unwrap_or(0);
        let state = pack(layout, floor, layout.max_seq(), config.machine);
        Ok(Generator {
            state: StateCell(AtomicU64::new(state)),
            header,
            deadline_ms: AtomicU64::new(u64::MAX),
            layout,
            epoch_ms: config.epoch.unix_ms(),
            tolerance_ms,
            random_bound,
            config,
            counters: Counters::default(),
            clock,
        })
    }

    /// The next ID, waiting for the next time unit if this one's sequence is used up.
    #[inline]
    pub fn next_id(&self) -> Result<u64, GenError> {
        let (state, _) = self.reserve(1, true)?;
        Ok(self.id_of(state))
    }

    /// The next ID, or [`GenError::WouldBlock`] instead of waiting for the next unit.
    #[inline]
    pub fn try_next_id(&self) -> Result<u64, GenError> {
        let (state, _) = self.reserve(1, false)?;
        Ok(self.id_of(state))
    }

    /// `n` IDs as contiguous runs, one compare-and-swap per time unit touched; waits for later
    /// units when `n` exceeds what the current one has left.
    pub fn next_ids(&self, n: u64) -> Result<IdBatch, GenError> {
        let mut runs = Vec::new();
        let mut left = n;
        while left > 0 {
            let (state, count) = self.reserve(left, true)?;
            runs.push(IdRun {
                first: self.id_of(state),
                count,
            });
            left -= count;
        }
        Ok(IdBatch { runs, len: n })
    }

    /// Up to `n` IDs from what the current unit has left (at least one), without waiting;
    /// [`GenError::WouldBlock`] if it has none. `n == 0` gives an empty batch.
    pub fn try_next_ids(&self, n: u64) -> Result<IdBatch, GenError> {
        if n == 0 {
            return Ok(IdBatch::default());
        }
        let (state, count) = self.reserve(n, false)?;
        Ok(IdBatch {
            runs: vec![IdRun {
                first: self.id_of(state),
                count,
            }],
            len: count,
        })
    }

    /// Stops issuing from the moment the clock reads `deadline_ms`: the owner's permission to
    /// use the machine ID ends then (e.g. a lease not confirmed in time). `u64::MAX` lifts it.
    pub fn set_deadline_ms(&self, deadline_ms: u64) {
        self.deadline_ms.store(deadline_ms, Ordering::Release);
    }

    /// Stops issuing now, until a later [`set_deadline_ms`](Self::set_deadline_ms).
    pub fn fence(&self) {
        self.set_deadline_ms(0);
    }

    /// The current deadline (`u64::MAX` when none).
    pub fn deadline_ms(&self) -> u64 {
        self.deadline_ms.load(Ordering::Acquire)
    }

    /// Raises the high-water mark: nothing at or below `time` is issued from now on. Used when
    /// a lease reveals that the machine ID issued up to `time` elsewhere. Never lowers it.
    pub fn raise_floor(&self, time: u64) -> Result<(), FieldError> {
        self.check_floor(time)?;
        self.update_state(|cur| {
            let floor = pack(self.layout, time, self.layout.max_seq(), cur & MACHINE_MASK);
            cur.max(floor)
        });
        Ok(())
    }

    /// Moves the generator to another machine ID (a new lease), whose IDs issued elsewhere reach
    /// up to `floor`: one atomic step, so no ID mixes the old machine with the new state.
    pub fn switch_machine(&self, machine: u64, floor: u64) -> Result<(), ConfigError> {
        self.config.pools.check(machine, self.config.gen_method)?;
        self.check_floor(floor)?;
        self.update_state(|cur| {
            let time = (cur >> self.layout.time_shift()).max(floor);
            pack(self.layout, time, self.layout.max_seq(), machine)
        });
        Ok(())
    }

    /// The machine ID in use (it changes only through [`switch_machine`](Self::switch_machine)).
    pub fn machine(&self) -> u64 {
        self.state.0.load(Ordering::Acquire) & MACHINE_MASK
    }

    /// The time value of the last issued ID, or of the floor: the high-water mark to persist.
    pub fn last_issued_time(&self) -> u64 {
        self.state.0.load(Ordering::Acquire) >> self.layout.time_shift()
    }

    /// When the unit after the last issued one starts (ms since the Unix epoch): where a waiter
    /// for fresh sequence space sleeps until.
    pub fn next_unit_start_ms(&self) -> u64 {
        self.unit_start_ms(self.last_issued_time().saturating_add(1))
    }

    fn check_floor(&self, time: u64) -> Result<(), FieldError> {
        if time > self.layout.max_time() {
            return Err(FieldError::out_of_range(
                "floor",
                time,
                0,
                self.layout.max_time(),
            ));
        }
        Ok(())
    }

    fn update_state(&self, f: impl Fn(u64) -> u64) {
        let mut cur = self.state.0.load(Ordering::Acquire);
        loop {
            let next = f(cur);
            match self
                .state
                .0
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The configuration this generator was built from (its `machine` is the first one).
    pub fn config(&self) -> &GeneratorConfig {
        &self.config
    }

    /// The layout of the issued IDs.
    pub fn layout(&self) -> &'static Layout {
        self.layout
    }

    /// The clock this generator reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Counters of clock rollbacks and overflow waits.
    pub fn stats(&self) -> GeneratorStats {
        let c = &self.counters;
        GeneratorStats {
            clock_rollbacks: c.clock_rollbacks.load(Ordering::Relaxed),
            clock_rollback_refusals: c.clock_rollback_refusals.load(Ordering::Relaxed),
            overflow_waits: c.overflow_waits.load(Ordering::Relaxed),
        }
    }

    #[inline]
    fn id_of(&self, state: u64) -> u64 {
        self.header | state
    }

    /// Claims up to `want` consecutive sequence numbers in one unit; returns the state of the
    /// first (its ID without header) and how many were claimed.
    ///
    /// The state is read before the clock, so a time issued by another thread is never newer
    /// than this thread's reading unless the clock really stepped back.
    #[inline]
    fn reserve(&self, want: u64, block: bool) -> Result<(u64, u64), GenError> {
        let time_shift = self.layout.time_shift();
        let max_seq = self.layout.max_seq();
        let mut cur = self.state.0.load(Ordering::Acquire);
        let mut now_ms = self.clock.now_ms();
        loop {
            let deadline_ms = self.deadline_ms.load(Ordering::Acquire);
            if now_ms >= deadline_ms {
                return Err(GenError::Fenced { deadline_ms });
            }
            let now = self.time_of(now_ms)?;
            let last_time = cur >> time_shift;
            let machine = cur & MACHINE_MASK;
            let (time, seq) = if now > last_time {
                (now, self.first_seq(now, machine))
            } else {
                if now < last_time {
                    self.clock_behind(now_ms, last_time)?;
                }
                let seq = ((cur >> MACHINE_BITS) & max_seq) + 1;
                if seq > max_seq {
                    self.wait_for(last_time + 1, now_ms, block)?;
                    cur = self.state.0.load(Ordering::Acquire);
                    now_ms = self.clock.now_ms();
                    continue;
                }
                (last_time, seq)
            };
            let count = want.min(max_seq - seq + 1);
            let first = pack(self.layout, time, seq, machine);
            let last = first + ((count - 1) << MACHINE_BITS);
            match self
                .state
                .0
                .compare_exchange_weak(cur, last, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok((first, count)),
                Err(actual) => {
                    cur = actual;
                    // Our reading stays valid unless someone issued a later unit meanwhile.
                    if actual >> time_shift > now {
                        now_ms = self.clock.now_ms();
                    }
                }
            }
        }
    }

    /// Time units since the epoch at `now_ms`, or why there are none.
    #[inline]
    fn time_of(&self, now_ms: u64) -> Result<u64, GenError> {
        let Some(elapsed) = now_ms.checked_sub(self.epoch_ms) else {
            return Err(self.before_epoch(now_ms));
        };
        // Matching on the type lets the compiler divide by a constant.
        let time = match self.config.id_type {
            IdType::MaxPeak => elapsed / 1000,
            IdType::MinGranularity => elapsed,
        };
        if time > self.layout.max_time() {
            return Err(self.time_overflow());
        }
        Ok(time)
    }

    #[inline]
    fn first_seq(&self, time: u64, machine: u64) -> u64 {
        if self.random_bound == 0 {
            0
        } else {
            splitmix64(time ^ machine.rotate_left(40)) % self.random_bound
        }
    }

    #[cold]
    fn before_epoch(&self, now_ms: u64) -> GenError {
        GenError::BeforeEpoch {
            now_ms,
            epoch_ms: self.epoch_ms,
        }
    }

    #[cold]
    fn time_overflow(&self) -> GenError {
        GenError::TimeOverflow {
            end_of_life_ms: self.layout.end_of_life_ms(self.config.epoch),
        }
    }

    /// The clock reads before the last issued unit: ride it out within the tolerance.
    #[cold]
    #[inline(never)]
    fn clock_behind(&self, now_ms: u64, last_time: u64) -> Result<(), GenError> {
        let behind_ms = self.unit_start_ms(last_time).saturating_sub(now_ms);
        let c = &self.counters;
        if behind_ms > self.tolerance_ms {
            c.clock_rollback_refusals.fetch_add(1, Ordering::Relaxed);
            return Err(GenError::ClockBehind {
                behind_ms,
                tolerance_ms: self.tolerance_ms,
            });
        }
        // Count each episode once, not once per ID issued during it.
        if c.last_rollback_time.swap(last_time + 1, Ordering::Relaxed) != last_time + 1 {
            c.clock_rollbacks.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The unit's sequence is used up: wait for `next_time` to start (or say how long).
    ///
    /// The wait is bounded by the distance seen now (the [`Clock`] contract), so a clock stepped
    /// back meanwhile sends the caller round `reserve` again, which reads the clock afresh: within
    /// the tolerance it waits once more (the remaining distance is at most the tolerance plus a
    /// unit), beyond it the caller gets `ClockBehind`. No blocking call outlives a clock step.
    #[cold]
    #[inline(never)]
    fn wait_for(&self, next_time: u64, now_ms: u64, block: bool) -> Result<(), GenError> {
        if next_time > self.layout.max_time() {
            return Err(self.time_overflow());
        }
        let target_ms = self.unit_start_ms(next_time);
        if !block {
            return Err(GenError::WouldBlock {
                wait_ms: target_ms.saturating_sub(now_ms),
                unit: self.layout.unit_name,
            });
        }
        self.counters.overflow_waits.fetch_add(1, Ordering::Relaxed);
        self.clock.wait_until_ms(target_ms);
        Ok(())
    }

    fn unit_start_ms(&self, time: u64) -> u64 {
        self.epoch_ms + time * self.layout.unit_ms
    }
}

impl<C> fmt::Debug for Generator<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generator")
            .field("config", &self.config)
            .field("state", &self.state.0.load(Ordering::Relaxed))
            .field("deadline_ms", &self.deadline_ms.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Time, seq and machine as bits 0-59 of an ID.
const fn pack(layout: &Layout, time: u64, seq: u64, machine: u64) -> u64 {
    time << layout.time_shift() | seq << MACHINE_BITS | machine
}

/// A stateless mixer: spreads each unit's start without any shared RNG state on the hot path.
const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
