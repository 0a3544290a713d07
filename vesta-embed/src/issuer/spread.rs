//! Calls spread over an issuer's machine IDs (`machine.ids` above 1). Each thread keeps to one
//! machine ID (its preferred one, a thread-local hint) while that ID's unit has room, and moves
//! to the next one that has room when it is used up, fenced or behind the clock: so no call
//! waits while another ID has room, and two threads mostly issue from two generators, never
//! sharing a cache line. Every ID comes from one generator's compare-and-swap, so IDs stay
//! unique and increase per machine ID; across machine IDs an ID may be below an earlier one
//! of another.
//!
//! The hot path adds one thread-local read to a lone generator's: no lock, no allocation, no
//! atomic. Only when the preferred ID refuses does a call try the others (cold).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use vesta_core::{Clock, GenError, IdBatch, IdRun};

use super::member::Member;
use crate::error::IssueError;

thread_local! {
    /// The member this thread issues from while it has room: a hint, taken modulo the
    /// members (`usize::MAX`: none yet).
    static PREFERRED: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Hands each new thread the next member in turn, so threads start on different ones.
static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

/// This thread's member among `k`.
#[inline]
fn preferred(k: usize) -> usize {
    let p = PREFERRED.with(Cell::get);
    if p < k {
        return p;
    }
    first_preference(p, k)
}

#[cold]
fn first_preference(p: usize, k: usize) -> usize {
    let p = match p {
        usize::MAX => NEXT_THREAD.fetch_add(1, Ordering::Relaxed),
        p => p,
    } % k;
    PREFERRED.with(|c| c.set(p));
    p
}

fn prefer(slot: usize) {
    PREFERRED.with(|c| c.set(slot));
}

/// The next ID from this thread's member, or from the next one with room; `block`: wait for
/// the earliest next unit when none has room now.
#[inline]
pub(super) fn one<C: Clock + 'static>(
    members: &[Member<C>],
    block: bool,
) -> Result<u64, IssueError> {
    let start = preferred(members.len());
    match members[start].generator().try_next_id() {
        Ok(id) => Ok(id),
        Err(e) => one_elsewhere(members, start, e, block),
    }
}

#[cold]
#[inline(never)]
fn one_elsewhere<C: Clock + 'static>(
    members: &[Member<C>],
    start: usize,
    first: GenError,
    block: bool,
) -> Result<u64, IssueError> {
    let k = members.len();
    let mut refused = Refused::default();
    refused.note(start, first);
    for i in 1..k {
        let slot = (start + i) % k;
        match members[slot].generator().try_next_id() {
            Ok(id) => {
                prefer(slot);
                return Ok(id);
            }
            Err(e) => refused.note(slot, e),
        }
    }
    match refused.soonest {
        Some((slot, _)) if block => {
            let member = &members[slot];
            let id = member
                .generator()
                .next_id()
                .map_err(|e| member.issue_error(e))?;
            prefer(slot);
            Ok(id)
        }
        _ => Err(refused.into_error(members, start)),
    }
}

/// Up to `n` IDs (at least one) that the members' current units still have, this thread's
/// member first, without waiting; `WouldBlock` when none has any.
pub(super) fn some<C: Clock + 'static>(
    members: &[Member<C>],
    n: u64,
) -> Result<IdBatch, IssueError> {
    if n == 0 {
        return Ok(IdBatch::default());
    }
    let start = preferred(members.len());
    match members[start].generator().try_next_ids(n) {
        Ok(batch) if batch.len() == n => Ok(batch),
        first => {
            let mut runs = Vec::new();
            let mut refused = Refused::default();
            let taken = gather(members, start, first, n, &mut runs, &mut refused);
            match taken {
                0 => Err(refused.into_error(members, start)),
                _ => Ok(IdBatch::from_runs(runs)),
            }
        }
    }
}

/// Exactly `n` IDs: what the members' units have now, then, unit after unit, what the next
/// ones bring (waiting on the member whose unit comes first).
pub(super) fn exactly<C: Clock + 'static>(
    members: &[Member<C>],
    n: u64,
) -> Result<IdBatch, IssueError> {
    let k = members.len();
    let mut runs = Vec::new();
    let mut left = n;
    while left > 0 {
        let start = preferred(k);
        let first = members[start].generator().try_next_ids(left);
        let mut refused = Refused::default();
        let took = gather(members, start, first, left, &mut runs, &mut refused);
        left -= took;
        if left == 0 {
            break;
        }
        // None has room: wait for the first next unit, and take up to a unit's worth there.
        let Some((slot, _)) = refused.soonest else {
            // Units used up by this round (the others fenced): the next round sees the wait.
            if took > 0 {
                continue;
            }
            return Err(refused.into_error(members, start));
        };
        let member = &members[slot];
        let per_unit = member.generator().layout().capacity_per_unit();
        let batch = member
            .generator()
            .next_ids(left.min(per_unit))
            .map_err(|e| member.issue_error(e))?;
        prefer(slot);
        left -= batch.len();
        runs.extend_from_slice(batch.runs());
    }
    Ok(IdBatch::from_runs(runs))
}

/// Takes up to `n` IDs without waiting: `first` (the answer of member `start`), then the other
/// members in turn; returns how many, their runs appended to `runs`, the refusals noted. The
/// thread moves to the last member that had room.
#[cold]
fn gather<C: Clock + 'static>(
    members: &[Member<C>],
    start: usize,
    first: Result<IdBatch, GenError>,
    n: u64,
    runs: &mut Vec<IdRun>,
    refused: &mut Refused,
) -> u64 {
    let k = members.len();
    let mut taken = 0;
    let mut answer = first;
    let mut slot = start;
    let mut i = 0;
    loop {
        match answer {
            Ok(batch) => {
                taken += batch.len();
                runs.extend_from_slice(batch.runs());
                if slot != start {
                    prefer(slot);
                }
            }
            Err(e) => refused.note(slot, e),
        }
        i += 1;
        if taken == n || i == k {
            return taken;
        }
        slot = (start + i) % k;
        answer = members[slot].generator().try_next_ids(n - taken);
    }
}

/// Why the members refused a call: what to wait for, or what to say.
#[derive(Default)]
struct Refused {
    /// The member whose next unit comes first, and in how long (ms).
    soonest: Option<(usize, u64)>,
    /// The first clock-behind refusal.
    behind: Option<GenError>,
    /// The first fenced member.
    fenced: Option<usize>,
    /// Any other refusal (the layout's end, the clock before the epoch: every member's alike).
    other: Option<GenError>,
}

impl Refused {
    fn note(&mut self, slot: usize, e: GenError) {
        match e {
            GenError::WouldBlock { wait_ms, .. } => {
                if self.soonest.is_none_or(|(_, w)| wait_ms < w) {
                    self.soonest = Some((slot, wait_ms));
                }
            }
            GenError::ClockBehind { .. } => {
                self.behind.get_or_insert(e);
            }
            GenError::Fenced { .. } => {
                self.fenced.get_or_insert(slot);
            }
            other => {
                self.other.get_or_insert(other);
            }
        }
    }

    /// The refusal a caller gets when no member had room: the wait for the soonest unit, else
    /// the clock behind, else a fence (the first fenced member's reason, and that every
    /// member refuses), else whatever every member said.
    fn into_error<C: Clock + 'static>(self, members: &[Member<C>], start: usize) -> IssueError {
        if let Some((slot, wait_ms)) = self.soonest {
            let unit = members[slot].generator().layout().unit_name();
            return IssueError::Refused(GenError::WouldBlock { wait_ms, unit });
        }
        if let Some(e) = self.behind.or(self.other) {
            return IssueError::Refused(e);
        }
        let slot = self.fenced.unwrap_or(start);
        let reason = members[slot].leased.refusal_reason();
        IssueError::Unavailable(format!(
            "{reason} (none of the issuer's {} machine IDs may issue)",
            members.len()
        ))
    }
}
