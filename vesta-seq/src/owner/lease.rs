//! The table's lease: taken at open (waiting at most a lease for an earlier holder's to run
//! out, refused at once when the holder is seen renewing), renewed by a beat every `lease / 6`
//! that extends the gate's term, ended at [`release`]. A lease that expired before a renewal
//! was confirmed stops every call (the term had lapsed long before), drops every section, and
//! is taken again as a new incarnation when the table is free — a table another process took
//! meanwhile is left to it.
//!
//! On one host the kernel decides first: a holder also claims the table on its host
//! (vesta-embed's `HostClaim`, `seq/<table>`, released however the process ends), so a
//! second process there is refused at once, and a holder that died there (its claim free, its
//! row marked with this host's arbiter) is taken over at once instead of after its lease — a
//! restart after a SIGKILL waits for nothing. Holders on other hosts are judged by the lease.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::mode::{self, Mode};
use super::{Held, Owner, Role, local_mark};
use crate::SeqError;
use crate::cluster::{Gate, SqlCoordinator, TTL_MS, beat, live_members, window};
use crate::db::owner::{LeaseRow, TABLE_ROW};
use crate::sequences::Inner;

fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

/// Takes the table's lease for a standalone server or a tool (a member holds nothing here):
/// the mode checked (and recorded, for a server), the lease taken, then no live member seen.
/// From here on the sequences serve every set within the lease's term.
pub(crate) async fn hold(this: &Arc<Inner>, owner: &Owner) -> Result<(), SeqError> {
    match owner.role {
        Role::Member => return Ok(()),
        Role::Standalone => mode::claim(&this.db, Mode::Standalone).await?,
        // A tool records nothing; a table served by a cluster is refused below while members
        // are live (one coordinated outside the database: by the caller, which names it).
        Role::Tool => {
            mode::recorded(&this.db).await?;
        }
    }
    vesta_segment::config::check(
        "seq.cluster_ttl_ms",
        u64::try_from(owner.lease.as_millis()).unwrap_or(u64::MAX),
        TTL_MS,
    )?;
    let held = Held::new(owner, this.token);
    match vesta_embed::lease::HostClaim::try_take(&claim_of(this)) {
        Ok(Ok(claim)) => {
            *held.claim.lock().unwrap_or_else(|e| e.into_inner()) = Some(claim);
        }
        // Another process of this host holds the table: refused now, naming it.
        Ok(Err(claimant)) => {
            let row = this.db.owner_read().await.ok().flatten();
            return Err(SeqError::Held {
                db: this.db.url().to_string(),
                holder: row
                    .filter(LeaseRow::live)
                    .map_or_else(|| format!("{claimant} on this host"), |r| describe(&r)),
            });
        }
        // No claim here (a host without the hold directory): the lease alone decides.
        Err(e) => tracing::warn!("claiming the table on this host: {e}"),
    }
    let gate = Arc::new(Gate::table());
    take(this, &held, &gate).await?;
    // Our claim is written: now the members' (a member writes its row, then reads this one).
    if let Err(e) = refuse_members(this).await {
        let _ = this.db.lease_leave(TABLE_ROW, &held.holder()).await;
        return Err(e);
    }
    gate.serve_all();
    if this.gate.set(Arc::clone(&gate)).is_err() {
        let _ = this.db.lease_leave(TABLE_ROW, &held.holder()).await;
        return Err(SeqError::Cluster(
            "these sequences already serve under a lease".into(),
        ));
    }
    let every = beat(held.ttl);
    let task = tokio::spawn(run(Arc::downgrade(this), every));
    *held.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    let _ = this.held.set(held);
    Ok(())
}

/// Ends the lease at once (a clean stop): the beat stops, nothing is served from here on, and
/// the next holder takes the table without waiting for an expiry.
pub(crate) async fn release(this: &Inner) {
    let Some(held) = this.held.get() else {
        return;
    };
    if let Some(task) = held.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
        task.abort();
    }
    if let Some(gate) = this.gate.get() {
        gate.lapse();
    }
    if let Err(e) = this.db.lease_leave(TABLE_ROW, &held.holder()).await {
        tracing::warn!("ending the table's lease: {e}; it runs out by itself");
    }
    held.claim.lock().unwrap_or_else(|e| e.into_inner()).take();
}

/// Refuses while a cluster's members are live in the table's database.
async fn refuse_members(this: &Arc<Inner>) -> Result<(), SeqError> {
    let live = live_members(&SqlCoordinator::of(Arc::clone(this))).await?;
    if live.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = live.iter().map(|m| m.member.to_string()).collect();
    Err(SeqError::Held {
        db: this.db.url().to_string(),
        holder: format!(
            "a cluster (live members {}, coordinated in the database)",
            ids.join(", ")
        ),
    })
}

/// Takes the lease as `held`'s incarnation, extending `gate`'s term; waits while an earlier
/// holder's lease may still run out (see [`Watch`]).
async fn take(this: &Inner, held: &Held, gate: &Gate) -> Result<(), SeqError> {
    let mut watch = Watch::new(held.ttl + this.options.store_timeout);
    loop {
        let sent = Instant::now();
        let joined = this
            .db
            .lease_join(
                TABLE_ROW,
                &held.holder(),
                &held.tcp,
                &held.rest,
                ttl_ms(held.ttl),
            )
            .await?;
        if joined {
            gate.extend(sent + window(held.ttl));
            return Ok(());
        }
        let row = this.db.owner_read().await?;
        // A holder of this host whose claim is free (this process holds it) is gone.
        if let Some(gone) = row.as_ref().filter(|r| r.live() && is_local(&r.holder))
            && held
                .claim
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some()
        {
            let sent = Instant::now();
            let taken = this
                .db
                .owner_take_from(
                    &gone.holder,
                    &held.holder(),
                    &held.tcp,
                    &held.rest,
                    ttl_ms(held.ttl),
                )
                .await?;
            if taken {
                tracing::info!(
                    "took the table's lease from {}, gone from this host",
                    gone.holder
                );
                gate.extend(sent + window(held.ttl));
                return Ok(());
            }
            continue;
        }
        if let Some(holder) = watch.judge(row.as_ref()) {
            return Err(SeqError::Held {
                db: this.db.url().to_string(),
                holder,
            });
        }
        tokio::time::sleep(beat(held.ttl)).await;
    }
}

/// Waits until the table's lease is free (a member, after writing its own row): refused,
/// naming the holder, when it is seen renewing or still runs after `ttl` and a store timeout.
pub(crate) async fn until_table_free(this: &Inner, ttl: Duration) -> Result<(), SeqError> {
    let mut watch = Watch::new(ttl + this.options.store_timeout);
    loop {
        let row = this.db.owner_read().await?;
        let Some(live) = row.as_ref().filter(|r| r.live()) else {
            return Ok(());
        };
        // A holder of this host: its claim says at once whether it lives.
        if is_local(&live.holder) {
            match vesta_embed::lease::HostClaim::try_take(&claim_of(this)) {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(_)) => {
                    return Err(SeqError::Held {
                        db: this.db.url().to_string(),
                        holder: describe(live),
                    });
                }
                Err(_) => {}
            }
        }
        if let Some(holder) = watch.judge(row.as_ref()) {
            return Err(SeqError::Held {
                db: this.db.url().to_string(),
                holder,
            });
        }
        tokio::time::sleep(beat(ttl)).await;
    }
}

/// The host claim's name of the table: `seq/<store>`.
fn claim_of(this: &Inner) -> String {
    format!("seq/{}", this.store)
}

/// Whether `holder` held a claim this host's kernel decides.
fn is_local(holder: &str) -> bool {
    local_mark().is_some_and(|mark| holder.ends_with(&mark))
}

/// Judges, read after read, whether a live lease is a holder at work (refuse now) or maybe an
/// earlier incarnation killed before it could end it (wait for its expiry, at most `limit`).
struct Watch {
    started: Instant,
    limit: Duration,
    first: Option<(String, i64)>,
}

impl Watch {
    fn new(limit: Duration) -> Watch {
        Watch {
            started: Instant::now(),
            limit,
            first: None,
        }
    }

    /// `Some(holder)` to refuse now: the lease was renewed (or taken by another) since the
    /// first read, or the wait ran out.
    fn judge(&mut self, row: Option<&LeaseRow>) -> Option<String> {
        let row = row.filter(|r| r.live())?;
        match &self.first {
            None => self.first = Some((row.holder.clone(), row.updated_ms)),
            Some((holder, updated)) if *holder != row.holder || *updated != row.updated_ms => {
                return Some(describe(row));
            }
            Some(_) => {}
        }
        (self.started.elapsed() >= self.limit).then(|| describe(row))
    }
}

/// A lease row for people: its holder, addresses and time left.
pub(crate) fn describe(row: &LeaseRow) -> String {
    let mut at = Vec::new();
    if !row.tcp.is_empty() {
        at.push(format!("tcp {}", row.tcp));
    }
    if !row.rest.is_empty() {
        at.push(format!("rest {}", row.rest));
    }
    at.push(format!(
        "its lease ends in {} ms",
        row.expires_ms.saturating_sub(row.now_ms).max(0)
    ));
    format!("{} ({})", row.holder, at.join(", "))
}

/// The beat, until the sequences are dropped.
async fn run(inner: Weak<Inner>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(i) = inner.upgrade() else { return };
        renew(&i).await;
    }
}

/// One beat: renew, or, once the lease is lost, stop and take it again if the table is free.
async fn renew(i: &Arc<Inner>) {
    let (Some(held), Some(gate)) = (i.held.get(), i.gate.get()) else {
        return;
    };
    let sent = Instant::now();
    match i
        .db
        .lease_renew(TABLE_ROW, &held.holder(), ttl_ms(held.ttl))
        .await
    {
        Ok(true) => gate.extend(sent + window(held.ttl)),
        Ok(false) => lost(i, held, gate).await,
        Err(e) => {
            held.beat_failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!("renewing the table's lease: {e}");
        }
    }
}

async fn lost(i: &Arc<Inner>, held: &Held, gate: &Gate) {
    use std::sync::atomic::Ordering::Relaxed;
    if gate.served(0) != 0 {
        held.leases_lost.fetch_add(1, Relaxed);
        tracing::error!(
            "the table's lease expired before a renewal was confirmed: nothing is served, every \
             section is dropped, and the lease is taken again once the table is free"
        );
        gate.lapse();
        i.stop_all().await;
    }
    held.new_holder(i.token);
    let sent = Instant::now();
    let holder = held.holder();
    let joined =
        i.db.lease_join(TABLE_ROW, &holder, &held.tcp, &held.rest, ttl_ms(held.ttl))
            .await;
    match joined {
        Ok(true) => {
            if let Err(e) = refuse_members(i).await {
                let _ = i.db.lease_leave(TABLE_ROW, &holder).await;
                note_taken(held, e.to_string());
                return;
            }
            gate.extend(sent + window(held.ttl));
            gate.serve_all();
            *held.taken_by.lock().unwrap_or_else(|e| e.into_inner()) = None;
            tracing::info!("took the table's lease again: serving");
        }
        Ok(false) => match i.db.owner_read().await {
            Ok(Some(row)) => note_taken(held, describe(&row)),
            Ok(None) | Err(_) => {
                held.beat_failures.fetch_add(1, Relaxed);
            }
        },
        Err(e) => {
            held.beat_failures.fetch_add(1, Relaxed);
            tracing::warn!("taking the table's lease again: {e}");
        }
    }
}

/// Remembers (and logs once) who holds the table this process lost.
fn note_taken(held: &Held, by: String) {
    let mut taken = held.taken_by.lock().unwrap_or_else(|e| e.into_inner());
    if taken.as_deref() != Some(by.as_str()) {
        tracing::error!("the table is held by {by}: this process serves nothing until it is free");
    }
    *taken = Some(by);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(holder: &str, updated_ms: i64, expires_ms: i64) -> LeaseRow {
        LeaseRow {
            holder: holder.into(),
            tcp: String::new(),
            rest: "127.0.0.1:8080".into(),
            expires_ms,
            updated_ms,
            now_ms: 1_000,
        }
    }

    #[test]
    fn a_renewing_holder_is_refused_at_once_a_silent_one_after_the_limit() {
        let mut w = Watch::new(Duration::from_secs(60));
        assert_eq!(w.judge(None), None);
        assert_eq!(w.judge(Some(&row("a", 900, 5_000))), None);
        assert_eq!(
            w.judge(Some(&row("a", 900, 5_000))),
            None,
            "not renewed yet"
        );
        let said = w
            .judge(Some(&row("a", 950, 5_050)))
            .expect("renewed: refused");
        assert_eq!(said, "a (rest 127.0.0.1:8080, its lease ends in 4050 ms)");
        let mut w = Watch::new(Duration::ZERO);
        assert!(w.judge(Some(&row("b", 900, 5_000))).is_some(), "waited out");
        let mut w = Watch::new(Duration::from_secs(60));
        assert_eq!(w.judge(Some(&row("b", 900, 999))), None, "expired: free");
        assert_eq!(w.judge(Some(&row("b", 900, 5_000))), None);
        assert!(
            w.judge(Some(&row("c", 900, 5_000))).is_some(),
            "another took it"
        );
    }
}
