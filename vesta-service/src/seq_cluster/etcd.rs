//! The sequences cluster coordinated through etcd (`[seq] coordination = "etcd"`,
//! docs/seq-cluster.md): the [`Coordinator`] over vesta-embed's etcd v3 JSON-gateway client, so
//! a deployment whose machine IDs are leased from etcd keeps the cluster's leases there too.
//!
//! Keys, under `<etcd.root>/seq/<store>` (`<store>`: the sequences database's own name,
//! [`store_id`](vesta_segment::seq::cluster::store_id), so servers on one database form one
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
//! One range over the prefix reads every key at one revision: a set whose holder has no member
//! key in that read had lost its lease before the read, and its term (2/3 of the TTL after its
//! last keep-alive was *sent*) ended before etcd expired it.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use vesta_embed::lease::{EtcdClient, EtcdSettings};
use vesta_segment::seq::cluster::{
    ClusterRows, CoordError, CoordFuture, Coordinator, Joining, MemberRow, SetRow,
};
use vesta_segment::seq::sets::SETS;

/// Puts per transaction: under etcd's default `--max-txn-ops` (128).
const PER_TXN: usize = 64;

/// A member key's value.
#[derive(Serialize, Deserialize)]
struct Member {
    holder: String,
    tcp: String,
    rest: String,
}

/// A set key's value.
#[derive(Serialize, Deserialize)]
struct Set {
    owner: Option<u64>,
    holder: String,
}

/// The cluster's leases and sets in etcd.
#[derive(Debug)]
pub struct EtcdCoordinator {
    client: EtcdClient,
    /// `<root>/seq/<store>`.
    prefix: String,
    /// The etcd lease of the incarnation that joined last here: `(holder, lease ID)`.
    lease: Mutex<Option<(String, i64)>>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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
        }
    }

    fn member_key(&self, member: u64) -> String {
        format!("{}/members/{member}", self.prefix)
    }

    fn set_key(&self, set: u32) -> String {
        format!("{}/sets/{set:03}", self.prefix)
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
        let ttl_s = u64::try_from(j.ttl.as_millis().div_ceil(1_000))
            .unwrap_or(u64::MAX)
            .max(1);
        let (lease, granted) = self.client.grant_ttl(ttl_s).await?;
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
        let members_at = format!("{}/members/", self.prefix);
        let sets_at = format!("{}/sets/", self.prefix);
        let mut members = Vec::new();
        let mut sets: Vec<SetRow> = (0..SETS)
            .map(|set| SetRow {
                set,
                owner: None,
                holder: String::new(),
                generation: 0,
            })
            .collect();
        for kv in kvs {
            if let Some(id) = kv.key.strip_prefix(&members_at) {
                let (Ok(member), Ok(m)) =
                    (id.parse::<u64>(), serde_json::from_str::<Member>(&kv.value))
                else {
                    continue;
                };
                // Present: etcd has not expired its lease. Live at the read's clock.
                members.push(MemberRow {
                    member,
                    holder: m.holder,
                    tcp: m.tcp,
                    rest: m.rest,
                    expires_ms: now_ms,
                });
            } else if let Some(set) = kv.key.strip_prefix(&sets_at) {
                let Some(row) = set
                    .parse::<u32>()
                    .ok()
                    .and_then(|s| sets.get_mut(s as usize))
                else {
                    continue;
                };
                // An unreadable value is owned by nobody live: taken by compare-and-set like a
                // released set.
                let s = serde_json::from_str::<Set>(&kv.value).unwrap_or(Set {
                    owner: None,
                    holder: String::new(),
                });
                row.owner = s.owner;
                row.holder = s.holder;
                row.generation = kv.mod_revision;
            }
        }
        members.sort_by_key(|m| m.member);
        Ok(ClusterRows {
            now_ms,
            members,
            sets,
        })
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

impl Coordinator for EtcdCoordinator {
    fn describe(&self) -> String {
        format!(
            "etcd {} under {}",
            self.client.settings().shown,
            self.prefix
        )
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
