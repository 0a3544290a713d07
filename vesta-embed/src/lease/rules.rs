//! The lease rules, once for every source and free of I/O: every time comes in as an argument
//! (wall-clock ms, monotonic instants) or through the [`Clock`] trait, so the unit tests drive
//! them with a manual clock.
//!
//! - A holder may issue only until `sent + window`, where `sent` is when its last successful
//!   renewal (a mark in ZooKeeper, a state-file write) was *sent*: the [`Term`].
//! - Every renewal is a promise ([`Promise`]): the end of the last time unit the holder issued
//!   in *or may still issue in before the renewal's deadline*. A successor starts only in units
//!   at or after it ([`Floor`]), once its clock has got there ([`start_guard`], [`pass_guard`]).
//! - The final, clean mark covers the unit of `now` too: a call racing the fence may still land
//!   an ID in it.

use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

use vesta_core::{Clock, Epoch, GeneratorConfig, Layout, Position};

use crate::error::StartError;

/// How long after the last confirmed contact a ZooKeeper holder may keep issuing: two thirds of
/// the negotiated session timeout, so it has stopped well before the server can expire the
/// session (and delete the claim) even if its clock runs a little slow against the server's.
pub(crate) fn fence_window(session_timeout: Duration) -> Duration {
    Duration::from_millis((session_timeout.as_millis() * 2 / 3) as u64)
}

/// How often the ZooKeeper mark is written: the configured interval, but at least three times
/// per window so that one lost write never fences a healthy holder.
pub(crate) fn beat_interval(report_interval: Duration, window: Duration) -> Duration {
    report_interval
        .min(window / 3)
        .max(Duration::from_millis(10))
}

/// How many rewrites of the static state file one promise reaches ahead: like a ZooKeeper
/// beat, one failed write never pauses issuing.
pub(crate) const STATE_FILE_INTERVALS_AHEAD: u32 = 3;

/// The end (exclusive, ms since the Unix epoch) of time unit `time`.
pub(crate) fn unit_end_ms(layout: &Layout, time: u64) -> u64 {
    layout.unix_ms_of(time.saturating_add(1))
}

/// The mark a holder writes while it may still issue until `deadline_ms`: the end of the later
/// of its last issued unit and the unit containing its deadline's last millisecond.
pub(crate) fn promise_mark_ms(layout: &Layout, last_time: u64, deadline_ms: u64) -> u64 {
    let issued = unit_end_ms(layout, last_time);
    let promised = match layout.time_at(deadline_ms.saturating_sub(1)) {
        Ok(t) => unit_end_ms(layout, t),
        // Before the epoch nothing can be issued; past the end of life nothing either.
        Err(_) if deadline_ms <= layout.epoch().unix_ms() => 0,
        Err(_) => layout.end_of_life_ms(),
    };
    issued.max(promised)
}

/// Where a new holder of a machine ID starts, given the mark its earlier holders left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Floor {
    /// The generator floor: the unit containing the mark's last millisecond (0 if the mark is
    /// at or before the epoch). Nothing at or below it is issued.
    pub time: u64,
    /// The first instant the new holder may issue at: the start of the unit after the floor,
    /// which is at or after the mark. The start guard waits for the clock to read it.
    pub issue_from_ms: u64,
}

impl Floor {
    /// The floor that keeps issuing at or after `mark_ms`.
    pub(crate) fn after_mark(layout: &Layout, mark_ms: u64) -> Floor {
        let time = if mark_ms <= layout.epoch().unix_ms() {
            0
        } else {
            layout.time_at(mark_ms - 1).unwrap_or(layout.max_time())
        };
        Floor {
            time,
            issue_from_ms: layout.unix_ms_of(time + 1),
        }
    }

    /// The floor when no mark is known: no state file, no record in the registry, a record of
    /// another machine ID. An earlier holder may have issued up to the unit its clock last
    /// read, and that reading may be up to the rollback tolerance ahead of ours (the generator
    /// rides out steps back that small), so start after the unit containing
    /// `now + tolerance`. Without this, a restart within the same unit re-issued its IDs.
    pub(crate) fn unknown_past(layout: &Layout, now_ms: u64, tolerance_ms: u64) -> Floor {
        Floor::after_mark(
            layout,
            now_ms.saturating_add(tolerance_ms).saturating_add(1),
        )
    }
}

/// The floor a new holder of `machine` starts from, once the start guard has let the clock get
/// there: the later of after `mark_ms` (0: no mark known) and after whatever an unknown
/// earlier holder could have issued ([`Floor::unknown_past`]). A mark is never trusted
/// backwards: a stale one (a restored backup, a copied file, a record another holder
/// outran) can then never be worse than none. The wait is at most the tolerance plus one unit,
/// or `max_wait` when the mark lies further ahead. Blocks the calling thread while waiting.
pub(crate) fn guarded_floor<C: Clock + ?Sized>(
    clock: &C,
    config: &GeneratorConfig,
    machine: u64,
    mark_ms: u64,
    max_wait: Duration,
) -> Result<Floor, StartError> {
    let layout = &config.layout;
    let tolerance_ms = config.rollback_tolerance_ms();
    let now_ms = clock.now_ms();
    let unknown = Floor::unknown_past(layout, now_ms, tolerance_ms);
    let most_unknown = Duration::from_millis(tolerance_ms.saturating_add(layout.unit_ms()));
    let floor = match (mark_ms != 0).then(|| Floor::after_mark(layout, mark_ms)) {
        Some(marked) if marked.time > unknown.time => {
            pass_guard(
                clock,
                machine,
                marked.issue_from_ms,
                max_wait.max(most_unknown),
            )?;
            return Ok(marked);
        }
        _ => unknown,
    };
    if now_ms.saturating_add(tolerance_ms) < layout.epoch().unix_ms() {
        // Before the epoch nothing was issued; the generator says so at the first call.
        return Ok(floor);
    }
    pass_guard(clock, machine, floor.issue_from_ms, most_unknown)?;
    Ok(floor)
}

/// The start guard of a holder that continues exactly where the last one stopped (`at`): wait
/// (at most `max_wait`) until the clock reads the start of `at`'s unit, so a clock stepped back
/// since is waited out rather than refused at the first call.
pub(crate) fn guard_continuation<C: Clock + ?Sized>(
    clock: &C,
    layout: &Layout,
    machine: u64,
    at: Position,
    max_wait: Duration,
) -> Result<(), StartError> {
    pass_guard(clock, machine, layout.unix_ms_of(at.time), max_wait)
}

/// What the start guard decides for a clock reading and the first instant issuing may begin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Guard {
    /// The clock is at or past the first instant the new holder may issue at.
    Ready,
    /// Wait this many ms (no more than the allowed maximum).
    Wait(u64),
    /// The clock is this many ms behind: more than the guard may wait.
    Refuse(u64),
}

/// The start guard: issue nothing until the clock reads `issue_from_ms` (see [`Floor`]); wait
/// out gaps up to `max_wait`, refuse larger ones.
pub(crate) fn start_guard(now_ms: u64, issue_from_ms: u64, max_wait: Duration) -> Guard {
    let gap = issue_from_ms.saturating_sub(now_ms);
    if gap == 0 {
        Guard::Ready
    } else if u128::from(gap) <= max_wait.as_millis() {
        Guard::Wait(gap)
    } else {
        Guard::Refuse(gap)
    }
}

/// Passes the start guard on `clock`: waits (bounded by `max_wait`) until it reads
/// `issue_from_ms`, or refuses naming both times. Blocks the calling thread while waiting.
pub(crate) fn pass_guard<C: Clock + ?Sized>(
    clock: &C,
    machine: u64,
    issue_from_ms: u64,
    max_wait: Duration,
) -> Result<(), StartError> {
    // A coarse clock may wake a tick early: look again a few times, never wait longer.
    for _ in 0..4 {
        match start_guard(clock.now_ms(), issue_from_ms, max_wait) {
            Guard::Ready => return Ok(()),
            Guard::Wait(ms) if ms >= 1_000 => {
                tracing::warn!(
                    machine,
                    wait_ms = ms,
                    "start guard: waiting for the clock to pass every ID the machine ID's \
                     earlier holders may have issued"
                );
                clock.wait_until_ms(issue_from_ms);
            }
            Guard::Wait(ms) => {
                tracing::info!(machine, wait_ms = ms, "start guard: waiting for the clock");
                clock.wait_until_ms(issue_from_ms);
            }
            Guard::Refuse(_) => break,
        }
    }
    Err(StartError::ClockBehindMark {
        machine,
        now: Epoch::rfc3339(clock.now_ms()),
        mark: Epoch::rfc3339(issue_from_ms),
    })
}

/// One promise about to be written (a mark in ZooKeeper, a state-file record): issuing under
/// this machine ID reaches no further than `mark_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Promise {
    /// When it was sent, by the wall clock (ms since the Unix epoch).
    pub sent_ms: u64,
    /// When it was sent, by the monotonic clock: the watchdog counts from here.
    pub sent_at: Instant,
    /// Issuing may go on until the wall clock reads this, once the promise is written.
    pub deadline_ms: u64,
    /// The promise: the end of the last unit issued in or still issuable before the deadline.
    pub mark_ms: u64,
    /// The time field of the last issued ID (for people reading the mark).
    pub last_time: u64,
    /// True for the final mark, written after issuing stopped.
    pub clean: bool,
    /// The final mark's exact position: the last ID issued (see `Generator::stop`).
    pub stopped_at: Option<Position>,
}

/// The term of a lease: how far the holder has promised, and until when (monotonic) its last
/// confirmed renewal lets it issue. A state machine: [`renewal`](Self::renewal) →
/// (written) → [`renewed`](Self::renewed) → ... → [`lapsed`](Self::lapsed) when no renewal
/// was written in time.
#[derive(Clone, Debug)]
pub(crate) struct Term {
    layout: Layout,
    window: Duration,
    /// The highest mark promised for the machine ID in use.
    promised_ms: u64,
    /// Monotonic end of the current term; `None` when not renewed (or fenced for it).
    ends_at: Option<Instant>,
}

impl Term {
    /// A term with nothing promised yet; each renewal lets issuing go on for `window`.
    pub(crate) fn new(layout: Layout, window: Duration) -> Self {
        Term {
            layout,
            window,
            promised_ms: 0,
            ends_at: None,
        }
    }

    /// How long a renewal lets issuing go on.
    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    /// A new window (ZooKeeper grants its own session timeout at each connect).
    pub(crate) fn set_window(&mut self, window: Duration) {
        self.window = window;
    }

    /// The layout (with its epoch) the marks are in.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The renewal to write now: read the monotonic clock, then the wall clock (`now_ms`), then
    /// the generator's last issued time, in that order, so the promise covers every ID issued
    /// before the deadline. Never promises less than an earlier renewal.
    pub(crate) fn renewal(&self, sent_at: Instant, now_ms: u64, last_time: u64) -> Promise {
        let deadline_ms = now_ms.saturating_add(self.window.as_millis() as u64);
        let mark_ms = promise_mark_ms(&self.layout, last_time, deadline_ms).max(self.promised_ms);
        Promise {
            sent_ms: now_ms,
            sent_at,
            deadline_ms,
            mark_ms,
            last_time,
            clean: false,
            stopped_at: None,
        }
    }

    /// `promise` was written: the term now ends `window` after it was sent.
    pub(crate) fn renewed(&mut self, promise: &Promise) {
        self.promised_ms = self.promised_ms.max(promise.mark_ms);
        self.ends_at = Some(promise.sent_at + self.window);
    }

    /// The monotonic end of the term, if one runs (the watchdog sleeps until then).
    pub(crate) fn ends_at(&self) -> Option<Instant> {
        self.ends_at
    }

    /// The watchdog: true once, when `now` reaches the end of the term without a renewal.
    pub(crate) fn lapsed(&mut self, now: Instant) -> bool {
        match self.ends_at {
            Some(end) if now >= end => {
                self.ends_at = None;
                true
            }
            _ => false,
        }
    }

    /// Issuing stopped for another reason: no watchdog until the next renewal.
    pub(crate) fn end(&mut self) {
        self.ends_at = None;
    }

    /// A mark of this machine ID seen elsewhere (our own write whose answer was lost): never
    /// promise less than it.
    pub(crate) fn adopt_mark(&mut self, mark_ms: u64) {
        self.promised_ms = self.promised_ms.max(mark_ms);
    }

    /// Another machine ID: earlier promises were about the old one.
    pub(crate) fn forget_promises(&mut self) {
        self.promised_ms = 0;
    }

    /// The final, clean mark, written once issuing has stopped at `stopped_at` (the last ID
    /// issued): the end of its unit and of the unit of `now`. The position is exact
    /// (`Generator::stop`); the unit of `now` is covered too, so that a successor reading only
    /// the mark never needs the position.
    pub(crate) fn final_promise(
        &self,
        sent_at: Instant,
        now_ms: u64,
        stopped_at: Position,
    ) -> Promise {
        Promise {
            sent_ms: now_ms,
            sent_at,
            deadline_ms: now_ms,
            mark_ms: promise_mark_ms(&self.layout, stopped_at.time, now_ms.saturating_add(1)),
            last_time: stopped_at.time,
            clean: true,
            stopped_at: Some(stopped_at),
        }
    }
}

/// The order in which machine IDs are tried: the preferred one (held last time) if it is in the
/// pool, then the pool's IDs from the lowest, skipping those known to be claimed.
pub(crate) fn claim_order(
    pool: &RangeInclusive<u64>,
    preferred: Option<u64>,
    claimed: &[u64],
) -> Vec<u64> {
    let mut order = Vec::new();
    if let Some(p) = preferred.filter(|p| pool.contains(p) && !claimed.contains(p)) {
        order.push(p);
    }
    order.extend(
        pool.clone()
            .filter(|id| Some(*id) != preferred && !claimed.contains(id)),
    );
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use vesta_core::{Generator, GeneratorConfig, IdFields, IdType, MachinePools, ManualClock};

    const E: Epoch = Epoch::VESTA;
    const T0: u64 = 1_700_000_000_123;

    #[test]
    fn window_is_inside_the_session_timeout_and_beats_fit_three_times() {
        let w = fence_window(Duration::from_millis(10_000));
        assert_eq!(w, Duration::from_millis(6_666));
        assert_eq!(
            beat_interval(Duration::from_millis(3_000), w),
            Duration::from_millis(2_222)
        );
        assert_eq!(
            beat_interval(Duration::from_millis(500), w),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn promise_covers_the_deadline_unit_and_the_last_issued_unit() {
        let l = IdType::MaxPeak.layout();
        let t = 100;
        let start = l.unix_ms_of(t);
        // Deadline in the middle of unit 103: units up to 103 may still be used.
        assert_eq!(promise_mark_ms(l, t, start + 3_500), l.unix_ms_of(104));
        // Deadline exactly at the start of unit 103: its last usable ms is in unit 102.
        assert_eq!(promise_mark_ms(l, t, start + 3_000), l.unix_ms_of(103));
        // A clean mark (deadline now, already fenced) is the end of the last issued unit.
        assert_eq!(promise_mark_ms(l, t, start + 10), l.unix_ms_of(101));
        let ms = IdType::MinGranularity.layout();
        assert_eq!(promise_mark_ms(ms, 5, E.unix_ms() + 9), E.unix_ms() + 9);
    }

    #[test]
    fn floor_makes_the_next_unit_start_at_or_after_the_mark() {
        for id_type in [IdType::MaxPeak, IdType::MinGranularity] {
            let l = id_type.layout();
            for mark in [
                E.unix_ms() + 1,
                E.unix_ms() + 999,
                E.unix_ms() + 1000,
                1_700_000_000_123,
            ] {
                let floor = Floor::after_mark(l, mark);
                assert_eq!(floor.issue_from_ms, l.unix_ms_of(floor.time + 1));
                assert!(
                    floor.issue_from_ms >= mark,
                    "{id_type:?} mark {mark} {floor:?}"
                );
                // And the floor unit itself contains the mark's last ms: nothing is lost.
                assert!(l.unix_ms_of(floor.time) < mark);
            }
            assert_eq!(Floor::after_mark(l, E.unix_ms()).time, 0);
            assert_eq!(Floor::after_mark(l, 5).time, 0);
        }
    }

    #[test]
    fn guard_waits_small_gaps_and_refuses_large_ones() {
        let max = Duration::from_millis(5_000);
        assert_eq!(start_guard(1_000, 1_000, max), Guard::Ready);
        assert_eq!(start_guard(2_000, 1_000, max), Guard::Ready);
        assert_eq!(start_guard(1_000, 1_700, max), Guard::Wait(700));
        assert_eq!(start_guard(1_000, 6_000, max), Guard::Wait(5_000));
        assert_eq!(start_guard(1_000, 6_001, max), Guard::Refuse(5_001));
        assert_eq!(start_guard(1_000, 1_001, Duration::ZERO), Guard::Refuse(1));
    }

    #[test]
    fn passing_the_guard_waits_the_clock_to_the_target_or_refuses_without_waiting() {
        let max = Duration::from_millis(5_000);
        let clock = ManualClock::new(T0);
        pass_guard(&clock, 7, T0, max).unwrap();
        assert_eq!(clock.waits(), 0, "no gap, no wait");
        pass_guard(&clock, 7, T0 + 4_000, max).unwrap();
        assert_eq!((clock.waits(), clock.now_ms()), (1, T0 + 4_000));

        let err = pass_guard(&clock, 7, T0 + 4_000 + 5_001, max).unwrap_err();
        assert_eq!(clock.waits(), 1, "a big gap is refused at once");
        assert_eq!(clock.now_ms(), T0 + 4_000);
        let msg = err.to_string();
        assert!(
            matches!(err, StartError::ClockBehindMark { machine: 7, .. }),
            "{msg}"
        );
        assert!(msg.contains(&Epoch::rfc3339(T0 + 4_000)), "{msg}");
        assert!(msg.contains(&Epoch::rfc3339(T0 + 9_001)), "{msg}");
    }

    #[test]
    fn a_renewal_extends_the_deadline_to_send_plus_window_and_promises_past_it() {
        for id_type in [IdType::MaxPeak, IdType::MinGranularity] {
            let l = id_type.layout();
            let window = Duration::from_millis(6_666);
            let mut term = Term::new(l.clone(), window);
            let sent = Instant::now();
            let last = l.time_at(T0).unwrap();
            let p = term.renewal(sent, T0, last);
            assert_eq!(p.deadline_ms, T0 + 6_666);
            assert_eq!((p.sent_ms, p.sent_at, p.clean), (T0, sent, false));
            // Every unit that may still be used before the deadline ends at or before the mark.
            let last_usable = l.time_at(p.deadline_ms - 1).unwrap();
            assert_eq!(p.mark_ms, unit_end_ms(l, last_usable));
            assert!(p.mark_ms >= p.deadline_ms);
            assert_eq!(term.ends_at(), None, "not renewed until written");
            term.renewed(&p);
            assert_eq!(term.ends_at(), Some(sent + window));

            // A later renewal with the wall clock stepped back never promises less.
            let again = term.renewal(sent + Duration::from_secs(1), T0 - 60_000, last);
            assert_eq!(again.deadline_ms, T0 - 60_000 + 6_666);
            assert_eq!(again.mark_ms, p.mark_ms);
            // A new machine ID starts from nothing.
            term.forget_promises();
            assert!(term.renewal(sent, T0 - 60_000, 0).mark_ms < p.mark_ms);
        }
    }

    #[test]
    fn a_lapse_is_reported_once_at_the_end_of_the_term() {
        let mut term = Term::new(
            IdType::MaxPeak.layout().clone(),
            Duration::from_millis(1_000),
        );
        let sent = Instant::now();
        assert!(
            !term.lapsed(sent + Duration::from_secs(60)),
            "no term, no lapse"
        );
        term.renewed(&term.renewal(sent, T0, 0));
        assert!(!term.lapsed(sent + Duration::from_millis(999)));
        assert!(term.lapsed(sent + Duration::from_millis(1_000)));
        assert!(
            !term.lapsed(sent + Duration::from_millis(1_001)),
            "only once"
        );
        assert_eq!(term.ends_at(), None);
        // A renewal starts a new term; ending it (fenced for another reason) stops the watchdog.
        let later = sent + Duration::from_secs(5);
        term.renewed(&term.renewal(later, T0 + 5_000, 0));
        assert_eq!(term.ends_at(), Some(later + Duration::from_millis(1_000)));
        term.end();
        assert!(!term.lapsed(later + Duration::from_secs(60)));
    }

    #[test]
    fn the_final_mark_covers_the_unit_of_now_and_every_issued_unit() {
        for id_type in [IdType::MaxPeak, IdType::MinGranularity] {
            let l = id_type.layout();
            let term = Term::new(l.clone(), Duration::from_millis(6_666));
            let now_unit = l.time_at(T0).unwrap();
            let at = |time| Position { time, seq: 3 };
            let p = term.final_promise(Instant::now(), T0, at(now_unit - 1));
            assert!(p.clean);
            assert_eq!(p.stopped_at, Some(at(now_unit - 1)));
            assert_eq!(p.mark_ms, unit_end_ms(l, now_unit), "{id_type:?}");
            // Issued ahead of the clock (a rollback ridden out): the issued unit counts.
            let p = term.final_promise(Instant::now(), T0, at(now_unit + 2));
            assert_eq!(p.mark_ms, unit_end_ms(l, now_unit + 2), "{id_type:?}");
        }
    }

    /// A holder renews, issues and crashes; the successor starts from the crash record's mark,
    /// on a clock that is behind: it waits, and its first ID is at or after the mark.
    #[test]
    fn a_crash_record_lets_a_successor_start_only_at_or_after_the_mark() {
        for id_type in [IdType::MaxPeak, IdType::MinGranularity] {
            let l = id_type.layout();
            let config = GeneratorConfig {
                layout: l.clone(),
                machine: 3,
                gen_method: vesta_core::GenMethod::Embed,
                pools: Some(MachinePools::default()),
                rollback_tolerance_ms: None,
                seq_start: vesta_core::SeqStart::Zero,
                floor: None,
            };
            let clock = Arc::new(ManualClock::new(T0));
            let holder = Generator::new(config.clone(), clock.clone()).unwrap();
            let mut term = Term::new(l.clone(), Duration::from_millis(3_000));
            let p = term.renewal(Instant::now(), clock.now_ms(), holder.last_issued_time());
            term.renewed(&p);
            holder.set_deadline_ms(p.deadline_ms);
            // Issues right up to its deadline, then dies: the record on file is `p`.
            let mut last = 0;
            while let Ok(id) = holder.next_id() {
                last = id;
                clock.advance(l.unit_ms().min(250));
            }
            let last_ms = l.unix_ms_of(IdFields::decode(last).time);
            assert!(last_ms < p.mark_ms, "issued past its promise");

            // The successor's clock is 2 s behind the holder's.
            let floor = Floor::after_mark(l, p.mark_ms);
            let clock_b = Arc::new(ManualClock::new(T0 - 2_000));
            pass_guard(&clock_b, 3, floor.issue_from_ms, Duration::from_secs(10)).unwrap();
            assert!(clock_b.now_ms() >= p.mark_ms);
            let successor = Generator::new(
                GeneratorConfig {
                    floor: Some(floor.time),
                    ..config
                },
                clock_b,
            )
            .unwrap();
            let first = successor.next_id().unwrap();
            assert!(first > last);
            let first_ms = l.unix_ms_of(IdFields::decode(first).time);
            assert!(
                first_ms >= p.mark_ms,
                "{id_type:?}: started inside the promise"
            );
        }
    }

    #[test]
    fn claim_order_prefers_the_last_id_then_the_lowest_free() {
        let pool = 0..=5;
        assert_eq!(claim_order(&pool, Some(3), &[0]), vec![3, 1, 2, 4, 5]);
        assert_eq!(claim_order(&pool, Some(3), &[3]), vec![0, 1, 2, 4, 5]);
        assert_eq!(claim_order(&pool, Some(9), &[]), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(
            claim_order(&pool, None, &[0, 1, 2, 3, 4, 5]),
            Vec::<u64>::new()
        );
        assert_eq!(claim_order(&(924..=925), None, &[]), vec![924, 925]);
    }
}
