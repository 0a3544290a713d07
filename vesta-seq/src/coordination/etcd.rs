//! The sequences cluster coordinated through etcd (`[seq] coordination = "etcd"`,
//! docs/seq-cluster.md): the [`Coordinator`] over vesta-embed's etcd v3 JSON-gateway client, so
//! a deployment whose machine IDs are leased from etcd keeps the cluster's leases there too.
//!
//! Keys, under `<etcd.root>/seq/<store>` (`<store>`: the sequences database's own name,
//! [`store_id`](crate::cluster::store_id), so servers on one database form one
//! cluster and servers on two never meet):
//!
//! - `members/<member>`: `{"holder", "tcp", "rest"}` attached to an etcd lease of the cluster's
//!   TTL (whole seconds, rounded up; etcd may raise it to its minimum). A join creates it only
//!   when absent (`create_revision == 0`): etcd deletes it once the lease expires or is
//!   revoked, so **a key present is a live lease, judged by etcd**. A renewal is a keep-alive,
//!   which etcd refuses once the lease is gone: an expired incarnation never comes back.
//! - `sets/<set>`: `{"owner", "holder"}`; its **generation is the key's `mod_revision`**, which
//!   every put raises. Take and release are puts in a transaction that compares the
//!   `mod_revision` read (0: never written, i.e. released), so two members never both take one
//!   set.
//!
//! - `<prefix>-floors/<kind>/<section>` (beside the prefix, so the beat's read skips them):
//!   the restore guard's floors, the highest raise of each section.
//!
//! One range over the prefix reads every key at one revision: a set whose holder has no member
//! key in that read had lost its lease before the read, and its term (2/3 of the TTL after its
//! last keep-alive was *sent*) ended before etcd expired it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::cluster::{ClusterRows, CoordError, CoordFuture, Coordinator, Joining};
use vesta_embed::lease::{EtcdClient, EtcdKv, EtcdSettings};

use super::records::{self, Member, Set, now_ms};

/// Puts per transaction: under etcd's default `--max-txn-ops` (128).
const PER_TXN: usize = 64;

/// How often etcd's leader looks for expired leases: a lease may outlive its TTL by this.
const EXPIRY_CHECK: Duration = Duration::from_millis(500);

/// etcd's smallest lease with default settings (1.5 election timeouts, rounded up), seconds:
/// what is assumed until a grant says.
const MIN_TTL_S: u64 = 2;

/// The cluster's leases and sets in etcd.
#[derive(Debug)]
pub struct EtcdCoordinator {
    client: EtcdClient,
    /// `<root>/seq/<store>`.
    prefix: String,
    /// The etcd lease of the incarnation that joined last here: `(holder, lease ID)`.
    lease: Mutex<Option<(String, i64)>>,
    /// The TTL etcd granted last, seconds (0: none yet).
    granted_s: AtomicU64,
}

/// `ttl` in whole seconds, rounded up, at least one.
fn ttl_s(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis().div_ceil(1_000))
        .unwrap_or(u64::MAX)
        .max(1)
}

impl EtcdCoordinator {
    /// The coordinator of the cluster on the sequences database named `store`, in the etcd
    /// of `settings` (see [`EtcdSettings::connection`]).
    pub fn new(settings: EtcdSettings, store: &str) -> Self {
        let prefix = format!("{}/seq/{store}", settings.root);
        EtcdCoordinator {
            client: EtcdClient::new(settings),
            prefix,
            lease: Mutex::new(None),
            granted_s: AtomicU64::new(0),
        }
    }

    fn member_key(&self, member: u64) -> String {
        format!("{}/members/{member}", self.prefix)
    }

    fn set_key(&self, set: u32) -> String {
        format!("{}/sets/{set:03}", self.prefix)
    }

    /// The restore guard's floors: `<prefix>-floors/`, beside the prefix and not under it, so
    /// the beat's one range over the members and sets never reads them.
    fn floors_at(&self) -> String {
        format!("{}-floors/", self.prefix)
    }

    /// The floor of a section: the highest raise as decimal text, raised by a put at the
    /// `mod_revision` read, never lowered.
    fn floor_key(&self, kind: i16, section: i64) -> String {
        format!("{}{kind}/{section}", self.floors_at())
    }

    /// The floor and its key's `mod_revision` (0: absent).
    async fn floor_read(&self, kind: i16, section: i64) -> Result<(u64, i64), String> {
        let key = self.floor_key(kind, section);
        // A range over the key as a prefix also finds `.../50` for `.../5`: the exact one.
        let kvs = self.client.range_prefix(&key).await?;
        Ok(kvs.iter().find(|kv| kv.key == key).map_or((0, 0), |kv| {
            (kv.value.trim().parse().unwrap_or(0), kv.mod_revision)
        }))
    }

    async fn raise_floor_inner(&self, kind: i16, section: i64, max: u64) -> Result<(), String> {
        let key = self.floor_key(kind, section);
        for _ in 0..5 {
            let (have, revision) = self.floor_read(kind, section).await?;
            if have >= max {
                return Ok(());
            }
            if self
                .client
                .put_all_if_mod(&[(key.clone(), revision, max.to_string())])
                .await?
            {
                return Ok(());
            }
        }
        Err(format!(
            "raising the floor {key}: another writer kept changing it"
        ))
    }

    async fn floors_inner(&self) -> Result<Vec<((i16, i64), u64)>, String> {
        let at = self.floors_at();
        let kvs = self.client.range_prefix(&at).await?;
        Ok(kvs
            .iter()
            .filter_map(|kv| {
                let (kind, section) = kv.key.strip_prefix(&at)?.split_once('/')?;
                Some((
                    (kind.parse().ok()?, section.parse().ok()?),
                    kv.value.trim().parse().ok()?,
                ))
            })
            .collect())
    }

    fn failed(&self, message: String) -> CoordError {
        CoordError::Service {
            service: format!("etcd under {}", self.prefix),
            message,
        }
    }

    fn lease_of(&self, holder: &str) -> Option<i64> {
        let lease = self.lease.lock().unwrap_or_else(|e| e.into_inner());
        lease.as_ref().filter(|(h, _)| h == holder).map(|l| l.1)
    }

    fn set_lease(&self, lease: Option<(String, i64)>) {
        *self.lease.lock().unwrap_or_else(|e| e.into_inner()) = lease;
    }

    async fn join_inner(&self, j: Joining<'_>) -> Result<bool, String> {
        let ttl_s = ttl_s(j.ttl);
        let (lease, granted) = self.client.grant_ttl(ttl_s).await?;
        self.granted_s.store(granted, Ordering::Relaxed);
        if granted > ttl_s {
            tracing::info!(
                "etcd granted the cluster lease {granted} s (asked {ttl_s} s, its minimum): \
                 a killed member's keys wait that long"
            );
        }
        let key = self.member_key(j.member);
        let value = serde_json::to_string(&Member {
            holder: j.holder.into(),
            tcp: j.tcp.into(),
            rest: j.rest.into(),
        })
        .map_err(|e| e.to_string())?;
        // Free (never held, expired or left), or already this incarnation's (an earlier try
        // whose answer was lost).
        let joined = self.client.create(&key, &value, lease).await?
            || self.client.replace_if(&key, &value, &value, lease).await?;
        if joined {
            self.set_lease(Some((j.holder.into(), lease)));
        } else if let Err(e) = self.client.revoke(lease).await {
            tracing::debug!("revoking an unused lease: {e}");
        }
        Ok(joined)
    }

    async fn read_inner(&self) -> Result<ClusterRows, String> {
        let now_ms = now_ms();
        let kvs = self
            .client
            .range_prefix(&format!("{}/", self.prefix))
            .await?;
        Ok(rows(&self.prefix, &kvs, now_ms))
    }

    /// Puts `value` on each `(set, generation)` still at that generation: a chunk at a time
    /// in one transaction, a chunk that failed set by set. How many were put.
    async fn put_sets(&self, sets: &[(u32, i64)], value: &Set) -> Result<u64, String> {
        let value = serde_json::to_string(value).map_err(|e| e.to_string())?;
        let puts: Vec<(String, i64, String)> = sets
            .iter()
            .map(|&(set, generation)| (self.set_key(set), generation, value.clone()))
            .collect();
        let mut done = 0;
        for chunk in puts.chunks(PER_TXN) {
            if self.client.put_all_if_mod(chunk).await? {
                done += chunk.len() as u64;
                continue;
            }
            for put in chunk {
                if self
                    .client
                    .put_all_if_mod(std::slice::from_ref(put))
                    .await?
                {
                    done += 1;
                }
            }
        }
        Ok(done)
    }
}

/// The cluster's rows from the keys under `prefix` read at one revision, at `now_ms`: a set
/// key's generation is its `mod_revision`.
fn rows(prefix: &str, kvs: &[EtcdKv], now_ms: i64) -> ClusterRows {
    let members_at = format!("{prefix}/members/");
    let sets_at = format!("{prefix}/sets/");
    let sets = kvs.iter().filter_map(|kv| {
        let set = kv.key.strip_prefix(&sets_at)?.parse::<u32>().ok()?;
        Some((set, kv.value.as_bytes(), kv.mod_revision))
    });
    let members = kvs.iter().filter_map(|kv| {
        let name = kv.key.strip_prefix(&members_at)?;
        Some((name, kv.value.as_bytes()))
    });
    records::rows(sets, members, now_ms)
}

impl Coordinator for EtcdCoordinator {
    fn describe(&self) -> String {
        format!(
            "etcd {} under {}",
            self.client.settings().shown,
            self.prefix
        )
    }

    fn kind(&self) -> crate::Coordination {
        crate::Coordination::Etcd
    }

    fn lease(&self, ttl: Duration) -> Duration {
        let granted = match self.granted_s.load(Ordering::Relaxed) {
            0 => ttl_s(ttl).max(MIN_TTL_S),
            s => s,
        };
        Duration::from_secs(granted) + EXPIRY_CHECK
    }

    fn floor(&self, kind: i16, section: i64) -> CoordFuture<'_, Option<u64>> {
        Box::pin(async move {
            let (max, revision) = self
                .floor_read(kind, section)
                .await
                .map_err(|e| self.failed(e))?;
            Ok((revision != 0).then_some(max))
        })
    }

    fn raise_floor(&self, kind: i16, section: i64, max: u64) -> CoordFuture<'_, ()> {
        Box::pin(async move {
            self.raise_floor_inner(kind, section, max)
                .await
                .map_err(|e| self.failed(e))
        })
    }

    fn floors(&self) -> CoordFuture<'_, Vec<((i16, i64), u64)>> {
        Box::pin(async move { self.floors_inner().await.map_err(|e| self.failed(e)) })
    }

    fn init(&self) -> CoordFuture<'_, ()> {
        // Nothing to create: a set never written reads as released at generation 0. One read
        // checks that etcd answers.
        Box::pin(async move {
            self.read_inner()
                .await
                .map(|_| ())
                .map_err(|e| self.failed(e))
        })
    }

    fn join<'a>(&'a self, j: Joining<'a>) -> CoordFuture<'a, bool> {
        Box::pin(async move { self.join_inner(j).await.map_err(|e| self.failed(e)) })
    }

    fn renew<'a>(&'a self, _member: u64, holder: &'a str, _ttl: Duration) -> CoordFuture<'a, bool> {
        Box::pin(async move {
            let Some(lease) = self.lease_of(holder) else {
                return Ok(false);
            };
            // etcd restarts the TTL only while the lease exists: once it expired (and its member
            // key went with it) the answer carries no TTL.
            let alive = self
                .client
                .keep_alive(lease)
                .await
                .map_err(|e| self.failed(e))?;
            if !alive {
                self.set_lease(None);
            }
            Ok(alive)
        })
    }

    fn leave<'a>(&'a self, _member: u64, holder: &'a str) -> CoordFuture<'a, ()> {
        Box::pin(async move {
            let Some(lease) = self.lease_of(holder) else {
                return Ok(());
            };
            self.set_lease(None);
            // Revoking deletes the member key at once: the others take the sets (released
            // first) without waiting for an expiry.
            self.client.revoke(lease).await.map_err(|e| self.failed(e))
        })
    }

    fn read(&self) -> CoordFuture<'_, ClusterRows> {
        Box::pin(async move { self.read_inner().await.map_err(|e| self.failed(e)) })
    }

    fn take_sets<'a>(
        &'a self,
        member: u64,
        holder: &'a str,
        sets: &'a [(u32, i64)],
    ) -> CoordFuture<'a, u64> {
        Box::pin(async move {
            let owned = Set {
                owner: Some(member),
                holder: holder.into(),
            };
            self.put_sets(sets, &owned)
                .await
                .map_err(|e| self.failed(e))
        })
    }

    fn release_sets<'a>(
        &'a self,
        _holder: &'a str,
        sets: &'a [(u32, i64)],
    ) -> CoordFuture<'a, u64> {
        // The generations were read with this incarnation as owner: a put at them releases
        // only what is still ours.
        Box::pin(async move {
            let released = Set {
                owner: None,
                holder: String::new(),
            };
            self.put_sets(sets, &released)
                .await
                .map_err(|e| self.failed(e))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::is_live;
    use crate::sets::SETS;

    fn kv(key: &str, value: &str, mod_revision: i64) -> EtcdKv {
        EtcdKv {
            key: key.into(),
            value: value.into(),
            mod_revision,
            lease: 0,
        }
    }

    #[test]
    fn keys_read_as_rows_every_set_there_a_present_member_live() {
        let p = "/vesta/default/seq/abc";
        let rows = rows(
            p,
            &[
                kv(
                    &format!("{p}/members/951"),
                    r#"{"holder":"h:2:b.1","tcp":"127.0.0.1:2","rest":""}"#,
                    7,
                ),
                kv(
                    &format!("{p}/members/950"),
                    r#"{"holder":"h:1:a.3","tcp":"127.0.0.1:1","rest":""}"#,
                    5,
                ),
                kv(&format!("{p}/members/x"), "{}", 6),
                kv(
                    &format!("{p}/sets/007"),
                    r#"{"owner":950,"holder":"h:1:a.3"}"#,
                    9,
                ),
                kv(
                    &format!("{p}/sets/008"),
                    r#"{"owner":null,"holder":""}"#,
                    10,
                ),
                kv(&format!("{p}/sets/009"), "not json", 11),
                kv(&format!("{p}/sets/300"), r#"{"owner":1,"holder":"h"}"#, 12),
            ],
            1_000,
        );
        assert_eq!(
            rows.members.iter().map(|m| m.member).collect::<Vec<_>>(),
            [950, 951]
        );
        assert!(rows.members.iter().all(|m| is_live(m, rows.now_ms)));
        assert_eq!(rows.sets.len(), SETS as usize);
        let set = |s: usize| &rows.sets[s];
        assert_eq!(
            (set(7).owner, set(7).holder.as_str(), set(7).generation),
            (Some(950), "h:1:a.3", 9)
        );
        assert_eq!((set(8).owner, set(8).generation), (None, 10));
        assert_eq!((set(9).owner, set(9).generation), (None, 11));
        assert_eq!((set(0).owner, set(0).generation), (None, 0));
    }

    #[test]
    fn the_lease_is_whole_seconds_at_least_the_minimum_plus_the_expiry_check() {
        let mut section = vesta_embed::config::EtcdSection::default();
        section.endpoints = vec!["http://127.0.0.1:1".into()];
        section.root = "/r".into();
        let settings = EtcdSettings::connection(&section).expect("settings");
        let c = EtcdCoordinator::new(settings, "s");
        assert_eq!(
            c.lease(Duration::from_millis(1500)),
            Duration::from_millis(2500)
        );
        assert_eq!(
            c.lease(Duration::from_millis(6000)),
            Duration::from_millis(6500)
        );
        c.granted_s.store(5, Ordering::Relaxed);
        assert_eq!(
            c.lease(Duration::from_millis(1500)),
            Duration::from_millis(5500)
        );
        assert_eq!(c.set_key(7), "/r/seq/s/sets/007");
        assert_eq!(c.member_key(950), "/r/seq/s/members/950");
    }
}
