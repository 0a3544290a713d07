//! What an issuer of several machine IDs reports as a whole: the lease of one that issues, the
//! highest mark, the counters summed; each machine ID alone besides ([`MachineStatus`]).

use vesta_core::{Clock, GeneratorStats};

use super::member::Member;
use crate::status::{LeaseInfo, MachineStatus};

impl<C: Clock + 'static> Member<C> {
    /// This machine ID's status at `now_ms`, in `slot`.
    pub(super) fn status(&self, slot: usize, now_ms: u64) -> MachineStatus {
        let g = self.generator();
        // The generator's deadline may pass a moment before the lease thread records it.
        MachineStatus {
            slot,
            machine: g.machine(),
            lease: self.leased.info_at(now_ms),
            last_issued_time: g.last_issued_time(),
            generator: g.stats(),
        }
    }
}

/// The issuer's lease as a whole: the lease of the first machine ID that may issue (else the
/// first one's, with its reason), its event counters summed over all.
pub(super) fn whole_lease(machines: &[MachineStatus]) -> LeaseInfo {
    let mut lease = machines
        .iter()
        .find(|m| m.lease.state.can_issue())
        .unwrap_or(&machines[0])
        .lease
        .clone();
    if machines.len() > 1 {
        let sum = |f: fn(&LeaseInfo) -> u64| machines.iter().map(|m| f(&m.lease)).sum();
        lease.reconnects = sum(|l| l.reconnects);
        lease.fence_events = sum(|l| l.fence_events);
        lease.machine_changes = sum(|l| l.machine_changes);
    }
    lease
}

/// The generators' counters summed over the machine IDs.
pub(super) fn summed_stats(machines: &[MachineStatus]) -> GeneratorStats {
    let mut sum = GeneratorStats::default();
    for m in machines {
        sum.clock_rollbacks += m.generator.clock_rollbacks;
        sum.clock_rollback_refusals += m.generator.clock_rollback_refusals;
        sum.overflow_waits += m.generator.overflow_waits;
    }
    sum
}
