//! What an issuer reports about itself: machine ID, lease state, high-water mark, end of life and
//! event counters. Read by `status()`, the REST `/healthz` and `/metrics`, and the TCP `info` op.

use std::fmt;

use vesta_core::{ClockSync, Epoch, GenMethod, GeneratorStats, Layout};

/// Where the issuer stands with its machine ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseState {
    /// A static machine ID from config: always held.
    Static,
    /// Claiming a machine ID or waiting out its start guard; not issuing yet.
    Acquiring,
    /// A lease is held and confirmed; issuing.
    Held,
    /// The lease could not be confirmed in time; not issuing until it is re-established.
    Fenced,
    /// Shut down; the machine ID was released.
    Released,
}

impl LeaseState {
    /// Lower-case name for output and metrics labels.
    pub const fn name(self) -> &'static str {
        match self {
            LeaseState::Static => "static",
            LeaseState::Acquiring => "acquiring",
            LeaseState::Held => "held",
            LeaseState::Fenced => "fenced",
            LeaseState::Released => "released",
        }
    }

    /// True in the states where IDs may be issued.
    pub const fn can_issue(self) -> bool {
        matches!(self, LeaseState::Static | LeaseState::Held)
    }
}

impl fmt::Display for LeaseState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The lease part of the status, kept up to date by whoever holds the machine ID.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseInfo {
    /// Current state.
    pub state: LeaseState,
    /// Why the issuer is not issuing, when it is not.
    pub reason: Option<String>,
    /// When the current lease was taken (ms since the Unix epoch), if one is held.
    pub held_since_ms: Option<u64>,
    /// Last confirmed contact with the lease authority (ms since the Unix epoch).
    pub confirmed_ms: Option<u64>,
    /// Sessions re-established after a loss.
    pub reconnects: u64,
    /// Times issuing was fenced because the lease could not be confirmed.
    pub fence_events: u64,
    /// Times the lease was re-acquired under a different machine ID than the one held before
    /// (the old one was taken by another issuer while this one was away). IDs stay unique; an
    /// operator should still know why the ID moved.
    pub machine_changes: u64,
    /// Something unusual while issuing (e.g. issuing from the state file while ZooKeeper is
    /// unreachable, not yet registered).
    pub note: Option<String>,
    /// How long the last confirmed renewal took, from sending the mark to its confirmation
    /// (ms): the store's latency as the lease sees it. A renewal slower than the fence window
    /// fences the issuer.
    pub renew_latency_ms: Option<u64>,
    /// The fence window: issuing stops this long after the last confirmed renewal was sent
    /// (ms, by the monotonic clock). `None` for a static machine ID.
    pub fence_window_ms: Option<u64>,
}

impl LeaseInfo {
    /// The info of a static machine ID.
    pub fn fixed() -> Self {
        LeaseInfo {
            state: LeaseState::Static,
            reason: None,
            held_since_ms: None,
            confirmed_ms: None,
            reconnects: 0,
            fence_events: 0,
            machine_changes: 0,
            note: None,
            renew_latency_ms: None,
            fence_window_ms: None,
        }
    }

    /// How long the current lease has been held at `now_ms` (ms), if one is held.
    pub fn age_ms(&self, now_ms: u64) -> Option<u64> {
        self.held_since_ms.map(|t| now_ms.saturating_sub(t))
    }
}

/// A snapshot of an issuer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// The machine ID in use.
    pub machine: u64,
    /// Recorded in every ID.
    pub gen_method: GenMethod,
    /// The layout in use, with its epoch.
    pub layout: Layout,
    /// The lease and its counters.
    pub lease: LeaseInfo,
    /// The time value of the last issued ID (or the floor): the high-water mark.
    pub last_issued_time: u64,
    /// The layout's last representable instant with this epoch (ms since the Unix epoch).
    pub end_of_life_ms: u64,
    /// How long before the end of life the issuer warns (`id.end_of_life_margin_days`), ms.
    pub end_of_life_margin_ms: u64,
    /// Clock-rollback and overflow counters.
    pub generator: GeneratorStats,
    /// The kernel's view of the clock's synchronisation now (`None`: unknown, or not asked:
    /// `clock.require_sync = "off"`).
    pub clock_sync: Option<ClockSync>,
    /// Each machine ID of the issuer alone, in slot order (one for an issuer of one, the same
    /// as the fields above). With several (`machine.ids`), the fields above are the whole:
    /// the first machine ID, the lease of the first that may issue (else the first one's),
    /// the highest mark, the counters summed.
    pub machines: Vec<MachineStatus>,
}

/// One machine ID of an issuer: its lease, mark and counters.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MachineStatus {
    /// Its place among the issuer's machine IDs (0-based): stable while a lease moves the ID.
    pub slot: usize,
    /// The machine ID it holds (or, while acquiring, will try first).
    pub machine: u64,
    /// Its lease and counters.
    pub lease: LeaseInfo,
    /// The time value of its last issued ID (or floor): its high-water mark.
    pub last_issued_time: u64,
    /// Its generator's clock-rollback and overflow counters.
    pub generator: GeneratorStats,
}

impl Status {
    /// The epoch in use.
    pub fn epoch(&self) -> Epoch {
        self.layout.epoch()
    }

    /// True if IDs may be issued now (the generator may still refuse, e.g. clock behind): by
    /// at least one of its machine IDs.
    pub fn can_issue(&self) -> bool {
        self.lease.state.can_issue()
    }

    /// The machine IDs that may not issue now, with their leases (none while all may).
    pub fn machines_not_issuing(&self) -> impl Iterator<Item = &MachineStatus> {
        self.machines.iter().filter(|m| !m.lease.state.can_issue())
    }

    /// The machine IDs in words: `machine 930`, `machines 930..=933` (a run), or `machines
    /// 930, 941, 944` (leases), for a status line.
    pub fn machines_in_words(&self) -> String {
        let mut ids: Vec<u64> = self.machines.iter().map(|m| m.machine).collect();
        ids.sort_unstable();
        match ids.as_slice() {
            [] => format!("machine {}", self.machine),
            [only] => format!("machine {only}"),
            [first, .., last] if ids.windows(2).all(|w| w[1] == w[0] + 1) => {
                format!("machines {first}..={last}")
            }
            _ => {
                let list: Vec<String> = ids.iter().map(u64::to_string).collect();
                format!("machines {}", list.join(", "))
            }
        }
    }

    /// The warning while some machine IDs of several may not issue and others may: which, and
    /// why (the first one's reason). `None` while all issue, or none does.
    pub fn machines_warning(&self) -> Option<String> {
        let mut not = self.machines_not_issuing().peekable();
        let first = not.peek().copied()?;
        if !self.can_issue() {
            return None;
        }
        let ids: Vec<String> = not.map(|m| m.machine.to_string()).collect();
        let why = first
            .lease
            .reason
            .clone()
            .unwrap_or_else(|| format!("its lease is {}", first.lease.state));
        Some(format!(
            "{} of {} machine IDs not issuing ({}): {why}; the others issue",
            ids.len(),
            self.machines.len(),
            ids.join(", ")
        ))
    }

    /// The warning to give at `now_ms` if the layout ends within the margin: what ends when,
    /// and what to do. `None` while more than the margin is left.
    pub fn end_of_life_warning(&self, now_ms: u64) -> Option<String> {
        let left = vesta_core::time_left_ms(self.end_of_life_ms, now_ms);
        (left <= self.end_of_life_margin_ms).then(|| {
            format!(
                "the {} layout's time field is full at {} with epoch {}: {} left, less than \
                 id.end_of_life_margin_days; plan a new epoch (docs/operations.md, end of life)",
                self.layout,
                vesta_core::Epoch::rfc3339(self.end_of_life_ms),
                vesta_core::Epoch::rfc3339(self.epoch().unix_ms()),
                vesta_core::describe_span(left),
            )
        })
    }
}
