//! The SQL source of the lease: claims a machine ID in the `vesta_machine` table
//! ([`super::sql`]), passes the start guard against the mark earlier holders left, confirms the
//! lease by writing the mark every beat (which also extends it by `machine.lease_ms` on the
//! database's clock), re-claims after losing it, and on stop writes the final mark and frees
//! the row.
//!
//! Timing is the lease thread's ([`super::worker`]), as for ZooKeeper: issuing stops ⅔ of
//! `lease_ms` after the last confirmed renewal, by this host's monotonic clock, so a holder cut
//! off from the database stops before the database lets anyone else claim its ID.

use std::time::{Duration, Instant};

use vesta_core::{Clock, Epoch, Remedy};

use super::counted_in::CountedIn;
use super::rules::{Promise, beat_interval, fence_window};
use super::sql::{Claimed, SqlLease, SqlSettings};
use super::worker::{Lease, LeaseSource};
use crate::error::StartError;
use crate::status::LeaseState;

/// The shortest pause between retries.
const MIN_RETRY: Duration = Duration::from_millis(100);

/// How often the mark is written at most (more often when ⅔ of the lease is short).
const RENEW_EVERY: Duration = Duration::from_secs(1);

/// The (window, beat) of a lease of `settings`.
pub(crate) fn timing(settings: &SqlSettings) -> (Duration, Duration) {
    let window = fence_window(settings.lease);
    (window, beat_interval(RENEW_EVERY, window))
}

/// What a caller is told once a term runs out without a confirmed renewal.
fn unconfirmed_reason(db: &str, machine: u64, confirmed_ms: u64, window: Duration) -> String {
    format!(
        "the lease of machine {machine} is not confirmed by {db} (last confirmed at {}, allowed \
         {} ms); not issuing until it is",
        Epoch::rfc3339(confirmed_ms),
        window.as_millis()
    )
}

/// The machine ID leased from an SQL table.
pub(crate) struct SqlSource {
    settings: SqlSettings,
    /// `host:pid:started_ms` (and `#slot` for each machine ID of an issuer of several): unique
    /// per process start and machine ID, so a renewal never matches another member's row.
    holder: String,
    db: Option<SqlLease>,
    /// The machine ID in use (kept after a loss, to prefer it when re-claiming).
    machine: Option<u64>,
    /// Another holder took the ID: the next beat claims again.
    lost: bool,
    /// What this issuer's marks are counted in, as the table's column holds it.
    counted_in: CountedIn,
    encoded: String,
}

impl SqlSource {
    /// The source for `settings`, its marks counted in `counted_in`, its holder name ending in
    /// `tag` (the machine ID's slot in an issuer of several).
    pub(crate) fn new(
        settings: SqlSettings,
        now_ms: u64,
        counted_in: CountedIn,
        tag: &str,
    ) -> Self {
        let holder = format!(
            "{}:{}:{now_ms}{tag}",
            super::host_name(),
            std::process::id()
        );
        SqlSource {
            encoded: counted_in.encode(),
            counted_in,
            settings,
            holder,
            db: None,
            machine: None,
            lost: false,
        }
    }

    /// Connects if needed, claims an ID, waits out its mark and writes the first promise.
    async fn acquire<C: Clock>(&mut self, lease: &mut Lease<C>) -> Result<(), StartError> {
        if self.db.is_none() {
            self.db = Some(
                SqlLease::connect(&self.settings)
                    .await
                    .map_err(StartError::Lease)?,
            );
        }
        let db = self.db.as_ref().expect("connected above");
        let Claimed { machine, mark_ms } = db.claim(&self.holder, self.machine).await?;
        // Given back as found when the start fails: the mark and what it was counted in.
        let mut theirs = String::new();
        let checked = async {
            let counted_in = db.counted_in(machine).await.map_err(StartError::Lease)?;
            theirs = counted_in
                .as_ref()
                .map(CountedIn::encode)
                .unwrap_or_default();
            let s = &self.settings;
            self.counted_in.check(
                counted_in.as_ref(),
                machine,
                &format!("{} scope {:?}", s.db, s.scope),
                Remedy::RetireMark {
                    machine,
                    store: s.store(),
                },
            )?;
            lease
                .guarded_floor(machine, mark_ms, s.start_guard_max_wait)
                .await
        };
        let floor = match checked.await {
            Ok(floor) => floor,
            Err(e) => {
                let _ = db.release(&self.holder, machine, (mark_ms, &theirs)).await;
                return Err(e);
            }
        };
        lease.take_machine(machine, &floor, self.machine)?;
        self.machine = Some(machine);
        let promise = lease.renewal();
        match db
            .renew(
                &self.holder,
                machine,
                (promise.mark_ms, &self.encoded),
                self.settings.timeout,
            )
            .await
        {
            Ok(true) => {
                lease
                    .leased
                    .with_info(|info| info.held_since_ms = Some(promise.sent_ms));
                self.confirmed(lease, &promise, machine);
                Ok(())
            }
            Ok(false) => Err(StartError::Lease(format!(
                "machine {machine} was taken by another holder right after this one claimed it"
            ))),
            Err(e) => {
                let _ = db.release(&self.holder, machine, (mark_ms, &theirs)).await;
                Err(StartError::Lease(e))
            }
        }
    }

    fn confirmed<C: Clock>(&self, lease: &mut Lease<C>, promise: &Promise, machine: u64) {
        let on_expiry = unconfirmed_reason(
            self.settings.db.redacted(),
            machine,
            promise.sent_ms,
            lease.term.window(),
        );
        lease.confirmed(promise, on_expiry);
    }
}

impl<C: Clock + 'static> LeaseSource<C> for SqlSource {
    const THREAD: &'static str = "vesta-sql-lease";

    async fn start(&mut self, lease: &mut Lease<C>) -> Result<(), StartError> {
        self.acquire(lease).await
    }

    async fn beat(&mut self, lease: &mut Lease<C>) {
        let (Some(machine), Some(db)) = (self.machine, &self.db) else {
            return;
        };
        if self.lost {
            // Lost: claim again (maybe another ID, after its start guard).
            let result = self.acquire(lease).await;
            if lease.reclaimed(result, MIN_RETRY) {
                self.lost = false;
                tracing::info!(machine = ?self.machine, "SQL lease re-established");
            }
            return;
        }
        let promise = lease.renewal();
        let limit = lease.write_limit(&promise, self.settings.timeout, MIN_RETRY);
        match db
            .renew(
                &self.holder,
                machine,
                (promise.mark_ms, &self.encoded),
                limit,
            )
            .await
        {
            Ok(true) => self.confirmed(lease, &promise, machine),
            Ok(false) => {
                let reason = format!(
                    "machine {machine} is no longer ours in {} (another holder claimed it); \
                     re-claiming",
                    self.settings.db
                );
                tracing::warn!(%reason, "lease lost");
                lease.fence(LeaseState::Fenced, reason);
                self.lost = true;
                lease.next_beat = Instant::now();
            }
            Err(e) => {
                tracing::warn!(error = %e, "renewing the SQL lease failed; retrying");
                lease.leased.with_info(|info| {
                    info.note = Some(format!("renewing failed: {e}; retrying"));
                });
                lease.retry_soon(MIN_RETRY);
            }
        }
    }

    async fn lost(&mut self) -> String {
        // A lease is lost only as a beat finds it (no session to end in between).
        std::future::pending().await
    }

    fn on_lost(&mut self, _lease: &mut Lease<C>, _reason: String) {}

    async fn finish(&mut self, _lease: &mut Lease<C>, last: Promise) -> Result<(), String> {
        let (Some(machine), Some(db)) = (self.machine, &self.db) else {
            return Ok(());
        };
        let released = db
            .release(&self.holder, machine, (last.mark_ms, &self.encoded))
            .await;
        db.close().await;
        match released {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!(
                "machine {machine} was no longer ours in {}; its final mark was not written",
                self.settings.db
            )),
            Err(e) => Err(e),
        }
    }
}
