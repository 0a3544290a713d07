//! The lock-free generator: one `AtomicU64` holds the last issued ID's time, seq and node fields,
//! exactly as they sit in the ID, and every ID or batch is one compare-and-swap on it.
//!
//! The state word *is* the ID without its header (the fixed fields and genMethod, which never
//! change), in every layout: time lies above seq and node, so for one node the word grows with
//! (time, seq). Because it only ever moves forward, no interleaving of threads, clock jumps or
//! sequence overflows can hand out the same ID twice, and switching to a newly leased machine
//! ID is the same single atomic step. The rare paths (waiting for the next unit, clock behind,
//! fencing) sit in cold functions off the hot path.

mod batch;
mod config;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

pub use batch::{BatchIds, IdBatch, IdRun};
pub use config::{ConfigError, GeneratorConfig, MAX_ROLLBACK_TOLERANCE_MS, Position, SeqStart};

use crate::clock::Clock;
use crate::error::{FieldError, GenError};
use crate::layout::Layout;

/// Counters of the rare events, for status pages and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
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

/// Issues unique, time-ordered IDs for one machine ID. `Sync`: share it by reference or `Arc`.
pub struct Generator<C> {
    /// Time, seq and node of the last issued ID, in their places in it.
    state: StateCell,
    /// Fixed fields and genMethod: every ID is `header | state`.
    header: u64,
    /// Issuing stops when the clock reads this or later (ms since the Unix epoch).
    deadline_ms: AtomicU64,
    /// A unit issuing moves on to must be later than this (0: no such bound): set when issuing
    /// continues in a clean stop's unit (see [`continue_after`](Self::continue_after)).
    beyond: AtomicU64,
    /// The layout's shifts and masks, read on every call.
    bits: Bits,
    epoch_ms: u64,
    tolerance_ms: u64,
    /// Exclusive bound of a random sequence start; 0 for `SeqStart::Zero`.
    random_bound: u64,
    layout: Layout,
    config: GeneratorConfig,
    counters: Counters,
    clock: C,
}

/// The few numbers of a layout the hot path needs, copied out of it.
#[derive(Clone, Copy, Debug)]
struct Bits {
    time_shift: u32,
    seq_shift: u32,
    max_seq: u64,
    max_time: u64,
    /// The node field's bits in place.
    node_mask: u64,
    node_shift: u32,
    unit_ms: u64,
}

impl Bits {
    fn of(layout: &Layout) -> Self {
        Bits {
            time_shift: layout.time_shift(),
            seq_shift: layout.seq_shift(),
            max_seq: layout.max_seq(),
            max_time: layout.max_time(),
            node_mask: layout.node_span().mask(),
            node_shift: layout.node_span().low_bit,
            unit_ms: layout.unit_ms(),
        }
    }

    /// Time, seq and node (already in place) as the state word.
    #[inline]
    const fn pack(&self, time: u64, seq: u64, node: u64) -> u64 {
        time << self.time_shift | seq << self.seq_shift | node
    }
}

impl<C: Clock> Generator<C> {
    /// A generator for `config`, reading time from `clock`. Rejects a machine ID outside its
    /// pool, a version above 1, a tolerance above a minute or a floor past the layout's end.
    pub fn new(config: GeneratorConfig, clock: C) -> Result<Self, ConfigError> {
        config.validate()?;
        let layout = config.layout.clone();
        let bits = Bits::of(&layout);
        let header = layout.header(config.gen_method);
        let tolerance_ms = config.rollback_tolerance_ms();
        let random_bound = match config.seq_start {
            SeqStart::Zero => 0,
            SeqStart::Random { bound } => bound,
        };
        let floor = config.floor.unwrap_or(0);
        let node = config.machine << bits.node_shift;
        let state = bits.pack(floor, bits.max_seq, node);
        Ok(Generator {
            state: StateCell(AtomicU64::new(state)),
            header,
            deadline_ms: AtomicU64::new(u64::MAX),
            beyond: AtomicU64::new(0),
            bits,
            epoch_ms: layout.epoch().unix_ms(),
            tolerance_ms,
            random_bound,
            layout,
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
                step: 1 << self.bits.seq_shift,
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
                step: 1 << self.bits.seq_shift,
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
        let b = self.bits;
        self.update_state(|cur| cur.max(b.pack(time, b.max_seq, cur & b.node_mask)));
        Ok(())
    }

    /// Continues exactly after `last`, the last ID issued under this machine ID (known to be the
    /// last on this host: a clean stop's record that nothing issued since), within its unit:
    /// the next ID is `last`'s seq + 1 while the clock is in that unit; any later unit must be
    /// after `then_beyond` (callers wait for it). Another host may have issued with the ID
    /// since the stop (a copied state file): only in units after the stop, and before `now +
    /// tolerance`, which is what `then_beyond` should cover. Never moves back.
    pub fn continue_after(&self, last: Position, then_beyond: u64) -> Result<(), FieldError> {
        self.check_floor(last.time)?;
        self.check_floor(then_beyond)?;
        let b = self.bits;
        if last.seq > b.max_seq {
            return Err(FieldError::out_of_range("seq", last.seq, 0, b.max_seq));
        }
        self.beyond.fetch_max(then_beyond, Ordering::AcqRel);
        self.update_state(|cur| cur.max(b.pack(last.time, last.seq, cur & b.node_mask)));
        Ok(())
    }

    /// Stops issuing, as [`fence`](Self::fence) does, and returns where issuing stopped: the
    /// time and seq of the last ID issued (or of the floor, seq at its maximum, if none was).
    /// Exact even against calls racing the fence: the state word is moved on in one
    /// compare-and-swap after the fence, so a call that passed the deadline check before it
    /// fails its own compare-and-swap, sees the fence and issues nothing. Until a new deadline
    /// is set nothing is issued; after one, issuing goes on above the returned position.
    pub fn stop(&self) -> Position {
        self.fence();
        let b = self.bits;
        let mut cur = self.state.0.load(Ordering::Acquire);
        loop {
            let time = cur >> b.time_shift;
            let seq = (cur >> b.seq_shift) & b.max_seq;
            // Any other value will do, as long as it differs and never moves the word back.
            let moved = if seq < b.max_seq {
                b.pack(time, b.max_seq, cur & b.node_mask)
            } else if time < b.max_time {
                b.pack(time + 1, b.max_seq, cur & b.node_mask)
            } else {
                // The layout's very last ID: nothing can follow it anyway.
                return Position { time, seq };
            };
            match self.state.0.compare_exchange_weak(
                cur,
                moved,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Position { time, seq },
                Err(actual) => cur = actual,
            }
        }
    }

    /// Moves the generator to another machine ID (a new lease), whose IDs issued elsewhere reach
    /// up to `floor`: one atomic step, so no ID mixes the old machine with the new state.
    pub fn switch_machine(&self, machine: u64, floor: u64) -> Result<(), ConfigError> {
        self.config.pools().check(machine, self.config.gen_method)?;
        self.check_floor(floor)?;
        let b = self.bits;
        self.update_state(|cur| {
            let time = (cur >> b.time_shift).max(floor);
            b.pack(time, b.max_seq, machine << b.node_shift)
        });
        Ok(())
    }

    /// The machine ID in use (it changes only through [`switch_machine`](Self::switch_machine)).
    pub fn machine(&self) -> u64 {
        (self.state.0.load(Ordering::Acquire) & self.bits.node_mask) >> self.bits.node_shift
    }

    /// Where issuing stands: the time and seq of the last ID issued (or of the floor, seq at
    /// its maximum, if none was since). Unchanged between two readings exactly when nothing
    /// was issued between them.
    pub fn position(&self) -> Position {
        let b = self.bits;
        let cur = self.state.0.load(Ordering::Acquire);
        Position {
            time: cur >> b.time_shift,
            seq: (cur >> b.seq_shift) & b.max_seq,
        }
    }

    /// The time value of the last issued ID, or of the floor: the high-water mark to persist.
    pub fn last_issued_time(&self) -> u64 {
        self.state.0.load(Ordering::Acquire) >> self.bits.time_shift
    }

    /// When the unit after the last issued one starts (ms since the Unix epoch): where a waiter
    /// for fresh sequence space sleeps until.
    pub fn next_unit_start_ms(&self) -> u64 {
        let next = self.last_issued_time().saturating_add(1);
        let beyond = self.beyond.load(Ordering::Acquire).saturating_add(1);
        self.unit_start_ms(next.max(beyond))
    }

    fn check_floor(&self, time: u64) -> Result<(), FieldError> {
        if time > self.bits.max_time {
            return Err(FieldError::out_of_range(
                "floor",
                time,
                0,
                self.bits.max_time,
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
    pub fn layout(&self) -> &Layout {
        &self.layout
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
        let b = self.bits;
        let (time_shift, max_seq) = (b.time_shift, b.max_seq);
        let mut cur = self.state.0.load(Ordering::Acquire);
        let mut now_ms = self.clock.now_ms();
        loop {
            let deadline_ms = self.deadline_ms.load(Ordering::Acquire);
            if now_ms >= deadline_ms {
                return Err(GenError::Fenced { deadline_ms });
            }
            let now = self.time_of(now_ms)?;
            let last_time = cur >> time_shift;
            let node = cur & b.node_mask;
            let (time, seq) = if now > last_time {
                let beyond = self.beyond.load(Ordering::Relaxed);
                if now <= beyond {
                    self.wait_for(beyond + 1, now_ms, block)?;
                    cur = self.state.0.load(Ordering::Acquire);
                    now_ms = self.clock.now_ms();
                    continue;
                }
                (now, self.first_seq(now, node))
            } else {
                if now < last_time {
                    self.clock_behind(now_ms, last_time)?;
                }
                let seq = ((cur >> b.seq_shift) & max_seq) + 1;
                if seq > max_seq {
                    self.wait_for(last_time + 1, now_ms, block)?;
                    cur = self.state.0.load(Ordering::Acquire);
                    now_ms = self.clock.now_ms();
                    continue;
                }
                (last_time, seq)
            };
            let count = want.min(max_seq - seq + 1);
            let first = b.pack(time, seq, node);
            let last = first + ((count - 1) << b.seq_shift);
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
        // The common units divide by a constant; others pay for a division.
        let time = match self.bits.unit_ms {
            1 => elapsed,
            1000 => elapsed / 1000,
            10 => elapsed / 10,
            unit => elapsed / unit,
        };
        if time > self.bits.max_time {
            return Err(self.time_overflow());
        }
        Ok(time)
    }

    #[inline]
    fn first_seq(&self, time: u64, node: u64) -> u64 {
        if self.random_bound == 0 {
            0
        } else {
            let machine = node >> self.bits.node_shift;
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
            end_of_life_ms: self.layout.end_of_life_ms(),
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
        if next_time > self.bits.max_time {
            return Err(self.time_overflow());
        }
        let target_ms = self.unit_start_ms(next_time);
        if !block {
            return Err(GenError::WouldBlock {
                wait_ms: target_ms.saturating_sub(now_ms),
                unit: self.layout.unit_name(),
            });
        }
        self.counters.overflow_waits.fetch_add(1, Ordering::Relaxed);
        self.clock.wait_until_ms(target_ms);
        Ok(())
    }

    fn unit_start_ms(&self, time: u64) -> u64 {
        self.epoch_ms + time * self.bits.unit_ms
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

/// A stateless mixer: spreads each unit's start without any shared RNG state on the hot path.
const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
