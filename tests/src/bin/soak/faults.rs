//! The faults the soak injects and their schedule: one every `--fault-every` seconds, kinds
//! drawn from a shuffled bag so every kind comes up equally often; a fault that cannot be
//! applied now (its target is down or absent) is retried until it can, or skipped after a while.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use vesta_tests::soak::rng::Rng;

/// How long a fault may wait for its target before it is skipped.
const GIVE_UP: Duration = Duration::from_secs(20);

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// SIGKILL an embedded worker process (it holds a ZooKeeper, SQL or etcd lease).
    KillEmbedWorker,
    /// SIGKILL a `vesta gen --server` process.
    KillTcpClient,
    /// SIGKILL a REST client process.
    KillRestClient,
    /// SIGKILL one server of the TCP pair, start it again a second later.
    KillTcpServer,
    /// SIGTERM one server of the TCP pair (drain, release), start it again.
    RestartTcpServer,
    /// SIGKILL the REST server, start it again a second later.
    KillRestServer,
    /// SIGTERM the REST server, start it again.
    RestartRestServer,
    /// SIGKILL the ZooKeeper leader, start it again 5 s later.
    KillZkLeader,
    /// Step an embedded worker's clock back 5 ms.
    ClockBack5ms,
    /// Step an embedded worker's clock back 1 s.
    ClockBack1s,
    /// Step an embedded worker's clock back 1 h, restart its issuer while it is behind, then
    /// step it forward again.
    ClockBack1h,
    /// Stop PostgreSQL like a crash (immediate shutdown), start it again 5 s later: the
    /// SQL-leased workers fence, then lease again.
    CrashPostgres,
    /// SIGKILL etcd, start it again 5 s later: the etcd-leased workers fence, then lease again.
    KillEtcd,
    /// An operator's mistake: an older copy of a static `vesta gen`'s state file copied back
    /// before its next run (after SIGKILLing the run, if one runs).
    RestoreStateFile,
    /// An operator's mistake: a `vesta gen` run under another epoch on a static machine ID's
    /// state file; it must be refused.
    EpochFlip,
    /// An operator's mistake: four `vesta gen` runs at once on one static machine ID (three on
    /// its state file, one on the user's own), as `xargs -P4` runs them.
    ParallelGen,
    /// An operator's (or a tidy-up's) mistake: every file of the hold directory and every
    /// state file's `.lock` deleted, at any moment or while a static run issues (another run
    /// on its machine ID started right after, which must wait its turn).
    DeleteHold,
    /// SIGKILL a member of the sequences cluster, start it again a second later: its sets wait
    /// for its lease to expire, then move.
    KillSeqMember,
    /// SIGTERM a member of the sequences cluster (it hands its sets off), start it again.
    RestartSeqMember,
    /// Cut a member of the sequences cluster off from PostgreSQL (its proxy drops every byte)
    /// for three leases, then heal: it stops serving within its term, its sets move, and it
    /// joins again as a new incarnation.
    PartitionSeqMember,
    /// An operator's mistake: a standalone `vesta serve tcp` and a `vesta seq next --db` on the
    /// sequence group's table; both must be refused in one line.
    SecondSeqServer,
    /// An operator's mistake: the sequence group's table backed up (`pg_dump`) at one turn,
    /// put back under the members at the next, raised back (`vesta seq raise`) a few seconds
    /// later: the members refuse what went back meanwhile, never a number twice.
    RestoreSeqTable,
}

impl Fault {
    /// Every kind.
    pub const ALL: [Fault; 22] = [
        Fault::KillEmbedWorker,
        Fault::KillTcpClient,
        Fault::KillRestClient,
        Fault::KillTcpServer,
        Fault::RestartTcpServer,
        Fault::KillRestServer,
        Fault::RestartRestServer,
        Fault::KillZkLeader,
        Fault::ClockBack5ms,
        Fault::ClockBack1s,
        Fault::ClockBack1h,
        Fault::CrashPostgres,
        Fault::KillEtcd,
        Fault::RestoreStateFile,
        Fault::EpochFlip,
        Fault::ParallelGen,
        Fault::DeleteHold,
        Fault::KillSeqMember,
        Fault::RestartSeqMember,
        Fault::PartitionSeqMember,
        Fault::SecondSeqServer,
        Fault::RestoreSeqTable,
    ];

    /// The sequence group's kinds (left out of the bag when the group is off).
    pub fn is_seq(self) -> bool {
        matches!(
            self,
            Fault::KillSeqMember
                | Fault::RestartSeqMember
                | Fault::PartitionSeqMember
                | Fault::SecondSeqServer
                | Fault::RestoreSeqTable
        )
    }

    /// The name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Fault::KillEmbedWorker => "SIGKILL embedded worker",
            Fault::KillTcpClient => "SIGKILL TCP client",
            Fault::KillRestClient => "SIGKILL REST client",
            Fault::KillTcpServer => "SIGKILL TCP server",
            Fault::RestartTcpServer => "restart TCP server (SIGTERM)",
            Fault::KillRestServer => "SIGKILL REST server",
            Fault::RestartRestServer => "restart REST server (SIGTERM)",
            Fault::KillZkLeader => "SIGKILL ZooKeeper leader",
            Fault::ClockBack5ms => "clock step back 5 ms",
            Fault::ClockBack1s => "clock step back 1 s",
            Fault::ClockBack1h => "clock step back 1 h",
            Fault::CrashPostgres => "crash PostgreSQL (SQL leases)",
            Fault::KillEtcd => "SIGKILL etcd (etcd leases)",
            Fault::RestoreStateFile => "older state file copied back",
            Fault::EpochFlip => "epoch flip attempted",
            Fault::ParallelGen => "parallel vesta gen (4 runs)",
            Fault::DeleteHold => "hold files deleted",
            Fault::KillSeqMember => "SIGKILL seq member",
            Fault::RestartSeqMember => "restart seq member (SIGTERM)",
            Fault::PartitionSeqMember => "partition seq member from PostgreSQL",
            Fault::SecondSeqServer => "second server on the seq table",
            Fault::RestoreSeqTable => "seq table backed up / put back",
        }
    }
}

/// When the next fault is due and which one.
#[derive(Debug)]
pub struct Schedule {
    every: Duration,
    kinds: Vec<Fault>,
    next_at: Instant,
    bag: Vec<Fault>,
    pending: Option<(Fault, Instant)>,
    /// Faults applied, by kind.
    pub injected: BTreeMap<Fault, u64>,
    /// Faults given up on (no target for [`GIVE_UP`]), by kind.
    pub skipped: BTreeMap<Fault, u64>,
}

impl Schedule {
    /// The first fault comes after `first_after`, then one every `every`, of `kinds`.
    pub fn new(every: Duration, first_after: Duration, kinds: Vec<Fault>) -> Self {
        Schedule {
            every,
            kinds,
            next_at: Instant::now() + first_after,
            bag: Vec::new(),
            pending: None,
            injected: BTreeMap::new(),
            skipped: BTreeMap::new(),
        }
    }

    /// The fault to apply now, if one is due.
    pub fn due(&mut self, rng: &mut Rng) -> Option<Fault> {
        let now = Instant::now();
        if let Some((f, _)) = self.pending {
            return Some(f);
        }
        if now < self.next_at {
            return None;
        }
        if self.bag.is_empty() {
            self.bag = self.kinds.clone();
            rng.shuffle(&mut self.bag);
        }
        let f = self.bag.pop()?;
        self.pending = Some((f, now));
        Some(f)
    }

    /// The due fault was applied.
    pub fn applied(&mut self) {
        if let Some((f, _)) = self.pending.take() {
            *self.injected.entry(f).or_insert(0) += 1;
            self.next_at = Instant::now() + self.every;
        }
    }

    /// The due fault has no target now: it stays due, unless it waited too long. Returns the
    /// fault if it was given up on.
    pub fn not_now(&mut self) -> Option<Fault> {
        let (f, since) = self.pending?;
        if since.elapsed() < GIVE_UP {
            return None;
        }
        self.pending = None;
        *self.skipped.entry(f).or_insert(0) += 1;
        self.next_at = Instant::now() + self.every;
        Some(f)
    }

    /// All faults applied.
    pub fn total(&self) -> u64 {
        self.injected.values().sum()
    }
}
