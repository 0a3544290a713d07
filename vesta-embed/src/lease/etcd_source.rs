//! The etcd source of the lease: an etcd lease (TTL on etcd's clock) holding a claim key on a
//! machine ID ([`super::etcd`]); the start guard against the mark earlier holders left; every
//! beat a keep-alive and the mark; a new lease and claim after losing it; on stop the final
//! mark and the lease revoked.
//!
//! Timing is the lease thread's ([`super::worker`]): issuing stops ⅔ of the granted TTL after
//! the last confirmed beat (sent before the keep-alive), by this host's monotonic clock, so a
//! holder cut off from etcd stops before etcd expires its lease and frees the ID.

use std::time::{Duration, Instant};

use vesta_core::{Clock, Epoch, Remedy};

use super::Mark;
use super::counted_in::CountedIn;
use super::etcd::{EtcdClient, EtcdSettings};
use super::rules::{Promise, beat_interval, fence_window};
use super::worker::{Lease, LeaseSource};
use crate::error::StartError;
use crate::status::LeaseState;

/// The shortest pause between retries.
const MIN_RETRY: Duration = Duration::from_millis(100);

/// How often the mark is written at most.
const RENEW_EVERY: Duration = Duration::from_secs(1);

/// The (window, beat) before etcd granted a TTL.
pub(crate) fn initial_timing(settings: &EtcdSettings) -> (Duration, Duration) {
    let window = fence_window(Duration::from_secs(settings.ttl_s));
    (window, beat_interval(RENEW_EVERY, window))
}

/// The machine ID leased from etcd.
pub(crate) struct EtcdSource {
    client: EtcdClient,
    /// `host:pid:started_ms` (and `#slot` for each machine ID of an issuer of several): the
    /// claim's value, unique per process start and machine ID.
    holder: String,
    /// The etcd lease in use.
    lease_id: Option<i64>,
    /// The machine ID in use (kept after a loss, to prefer it when re-claiming).
    machine: Option<u64>,
    /// The lease or the claim is gone: the next beat claims again.
    lost: bool,
    /// What this issuer's marks are counted in.
    counted_in: CountedIn,
}

impl EtcdSource {
    /// The source for `settings`, its marks counted in `counted_in`, its holder name ending in
    /// `tag` (the machine ID's slot in an issuer of several).
    pub(crate) fn new(
        settings: EtcdSettings,
        now_ms: u64,
        counted_in: CountedIn,
        tag: &str,
    ) -> Self {
        EtcdSource {
            counted_in,
            client: EtcdClient::new(settings),
            holder: format!(
                "{}:{}:{now_ms}{tag}",
                super::host_name(),
                std::process::id()
            ),
            lease_id: None,
            machine: None,
            lost: false,
        }
    }

    fn settings(&self) -> &EtcdSettings {
        self.client.settings()
    }

    fn mark(&self, promise: &Promise) -> String {
        let mark = Mark::of(promise, self.holder.clone(), &self.counted_in);
        serde_json::to_string(&mark).unwrap_or_default()
    }

    /// A new etcd lease, a claim on the preferred or lowest free ID, its start guard, and the
    /// first mark.
    async fn acquire<C: Clock>(&mut self, lease: &mut Lease<C>) -> Result<(), StartError> {
        let fail = StartError::Lease;
        let (lease_id, ttl_s) = self.client.grant().await.map_err(fail)?;
        self.lease_id = Some(lease_id);
        let window = fence_window(Duration::from_secs(ttl_s));
        lease.term.set_window(window);
        lease.beat = beat_interval(RENEW_EVERY, window);
        let s = self.settings().clone();
        let held = self.client.held().await.map_err(fail)?;
        if let Some(id) = s.fixed
            && let Some((_, holder)) = held.iter().find(|h| h.0 == id)
            && *holder != self.holder
        {
            let _ = self.client.revoke(lease_id).await;
            return Err(StartError::Lease(format!(
                "etcd {}: machine {id} is held by {holder} under {}: another issuer runs with \
                 this static machine ID (each needs its own)",
                s.shown, s.root
            )));
        }
        let free = |m: &u64| !held.iter().any(|h| h.0 == *m);
        let wanted: Box<dyn Iterator<Item = u64>> = match s.fixed {
            Some(id) => Box::new(std::iter::once(id)),
            None => Box::new(
                self.machine
                    .filter(|m| s.pool.contains(m))
                    .into_iter()
                    .chain(s.pool.clone()),
            ),
        };
        let candidates = wanted.filter(free);
        let mut claimed = None;
        for machine in candidates {
            if self
                .client
                .create(&s.claim_key(machine), &self.holder, lease_id)
                .await
                .map_err(fail)?
            {
                claimed = Some(machine);
                break;
            }
        }
        let Some(machine) = claimed else {
            let _ = self.client.revoke(lease_id).await;
            if let Some(id) = s.fixed {
                return Err(StartError::Lease(format!(
                    "etcd {}: machine {id} under {} was claimed by another issuer at the same \
                     time: another issuer runs with this static machine ID (each needs its own)",
                    s.shown, s.root
                )));
            }
            return Err(StartError::Taken {
                message: format!(
                    "etcd {}: every machine ID of the {} pool {}..={} under {} is held",
                    s.shown,
                    s.pool_name,
                    s.pool.start(),
                    s.pool.end(),
                    s.root
                ),
                remedy: Box::new(Remedy::ListHolders { store: s.store() }),
            });
        };
        let taken = async {
            let mark = match self.client.get(&s.mark_key(machine)).await? {
                Some(text) => Some(
                    serde_json::from_str::<Mark>(&text)
                        .map_err(|e| format!("the mark of machine {machine} is unreadable: {e}"))?,
                ),
                None => None,
            };
            Ok::<Option<Mark>, String>(mark)
        };
        let mark = match taken.await {
            Ok(m) => m,
            Err(e) => {
                let _ = self.client.revoke(lease_id).await;
                return Err(StartError::Lease(e));
            }
        };
        if let Some(mark) = &mark {
            let counted = self.counted_in.check(
                mark.counted_in().as_ref(),
                machine,
                &format!("etcd {} {}", s.shown, s.mark_key(machine)),
                Remedy::RetireMark {
                    machine,
                    store: s.store(),
                },
            );
            if let Err(e) = counted {
                let _ = self.client.revoke(lease_id).await;
                return Err(e);
            }
        }
        let mark_ms = mark.map_or(0, |m| m.mark_ms);
        // The claim is kept alive while the start guard waits (up to a unit and the rollback
        // tolerance, two seconds in max-peak): etcd's lease can be as short as that, and a claim
        // lost during the wait failed the start ("lost right after it was claimed").
        let keep_every = lease.beat;
        let floor = {
            let mut guard =
                std::pin::pin!(lease.guarded_floor(machine, mark_ms, s.start_guard_max_wait));
            loop {
                match tokio::time::timeout(keep_every, guard.as_mut()).await {
                    Ok(floor) => break floor,
                    Err(_) => {
                        let _ = self.client.keep_alive(lease_id).await;
                    }
                }
            }
        };
        let floor = match floor {
            Ok(floor) => floor,
            Err(e) => {
                let _ = self.client.revoke(lease_id).await;
                return Err(e);
            }
        };
        lease.take_machine(machine, &floor, self.machine)?;
        self.machine = Some(machine);
        let promise = lease.renewal();
        match self.write_mark(machine, &promise).await {
            Ok(true) => {
                lease
                    .leased
                    .with_info(|info| info.held_since_ms = Some(promise.sent_ms));
                self.confirmed(lease, &promise, machine);
                Ok(())
            }
            Ok(false) => Err(StartError::Lease(format!(
                "machine {machine} was lost right after it was claimed"
            ))),
            Err(e) => {
                let _ = self.client.revoke(lease_id).await;
                Err(StartError::Lease(e))
            }
        }
    }

    /// Keep-alive, then the mark (only while the claim is ours). `Ok(false)`: lost.
    async fn write_mark(&self, machine: u64, promise: &Promise) -> Result<bool, String> {
        let Some(lease_id) = self.lease_id else {
            return Ok(false);
        };
        if !self.client.keep_alive(lease_id).await? {
            return Ok(false);
        }
        let s = self.settings();
        self.client
            .put_if(
                &s.claim_key(machine),
                &self.holder,
                &s.mark_key(machine),
                &self.mark(promise),
            )
            .await
    }

    fn confirmed<C: Clock>(&self, lease: &mut Lease<C>, promise: &Promise, machine: u64) {
        let on_expiry = format!(
            "the lease of machine {machine} is not confirmed by etcd {} (last confirmed at {}, \
             allowed {} ms); not issuing until it is",
            self.settings().shown,
            Epoch::rfc3339(promise.sent_ms),
            lease.term.window().as_millis()
        );
        lease.confirmed(promise, on_expiry);
    }
}

impl<C: Clock + 'static> LeaseSource<C> for EtcdSource {
    const THREAD: &'static str = "vesta-etcd-lease";

    async fn start(&mut self, lease: &mut Lease<C>) -> Result<(), StartError> {
        self.acquire(lease).await
    }

    async fn beat(&mut self, lease: &mut Lease<C>) {
        if self.lost {
            // Lost: a new lease and claim (maybe another ID, after its start guard).
            let result = self.acquire(lease).await;
            if lease.reclaimed(result, MIN_RETRY) {
                self.lost = false;
                tracing::info!(machine = ?self.machine, "etcd lease re-established");
            }
            return;
        }
        let Some(machine) = self.machine else { return };
        let promise = lease.renewal();
        let limit = lease.write_limit(&promise, self.settings().timeout, MIN_RETRY);
        match tokio::time::timeout(limit, self.write_mark(machine, &promise)).await {
            Ok(Ok(true)) => self.confirmed(lease, &promise, machine),
            Ok(Ok(false)) => {
                let reason = format!(
                    "the etcd lease of machine {machine} expired or its claim is gone; \
                     re-claiming"
                );
                tracing::warn!(%reason, "lease lost");
                lease.fence(LeaseState::Fenced, reason);
                self.lost = true;
                lease.next_beat = Instant::now();
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "renewing the etcd lease failed; retrying");
                lease.leased.with_info(|info| {
                    info.note = Some(format!("renewing failed: {e}; retrying"));
                });
                lease.retry_soon(MIN_RETRY);
            }
            Err(_) => lease.retry_soon(MIN_RETRY),
        }
    }

    async fn lost(&mut self) -> String {
        // Loss shows up in a beat (a keep-alive for an unknown lease, a claim not ours).
        std::future::pending().await
    }

    fn on_lost(&mut self, _lease: &mut Lease<C>, _reason: String) {}

    async fn finish(&mut self, _lease: &mut Lease<C>, last: Promise) -> Result<(), String> {
        let (Some(machine), Some(lease_id)) = (self.machine, self.lease_id) else {
            return Ok(());
        };
        let s = self.settings().clone();
        let wrote = self
            .client
            .put_if(
                &s.claim_key(machine),
                &self.holder,
                &s.mark_key(machine),
                &self.mark(&last),
            )
            .await;
        let revoked = self.client.revoke(lease_id).await;
        match (wrote, revoked) {
            (Ok(true), Ok(())) => Ok(()),
            (Ok(false), _) => Err(format!(
                "machine {machine} was no longer ours in etcd; its final mark was not written"
            )),
            (Err(e), _) | (_, Err(e)) => Err(e),
        }
    }
}
