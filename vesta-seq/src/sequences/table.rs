//! A section's trips to the table: its load (the row read, created at 0 when missing, and the
//! section put in memory, an idle one evicted first at the cap) and its raises (a
//! compare-and-set from the maximum this process last saw: a row another process moved fences
//! the section), when a call needs one or a step ahead of need.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::map::{Map, read};
use super::memory::set_of;
use super::{Inner, LIMIT, NUMERIC, STRINGS, SeqError, TIMEOUT_KEY};
use crate::db::seq::Cas;
use crate::key::SeqKey;
use crate::section::{Dense, Section, Slots, Sparse, raise_target};

/// The slots of a new section of kind `S`.
pub(super) trait Fresh: Slots + Sized {
    const KIND: i16;
    fn fresh(inner: &Inner, max: u64) -> Self;
}

impl Fresh for Dense {
    const KIND: i16 = NUMERIC;
    fn fresh(_: &Inner, max: u64) -> Self {
        Dense::new(max)
    }
}

impl Fresh for Sparse {
    const KIND: i16 = STRINGS;
    fn fresh(inner: &Inner, _: u64) -> Self {
        Sparse::new(
            Arc::clone(&inner.string_keys),
            inner.options.max_string_keys,
        )
    }
}

impl Inner {
    /// The section, loaded if it is not in memory.
    pub(super) async fn section<K, S>(
        this: &Arc<Inner>,
        which: fn(&Inner) -> &Map<K, S>,
        id: K,
        key: &SeqKey,
    ) -> Result<Arc<Section<S>>, SeqError>
    where
        K: Copy + Eq + std::hash::Hash + Into<u64> + Send + Sync + 'static,
        S: Fresh,
    {
        loop {
            if let Some(s) = read(which(this)).get(&id) {
                return Ok(Arc::clone(s));
            }
            let deadline = Instant::now() + this.options.store_timeout;
            Inner::load(this, which, id, key, deadline).await?;
        }
    }

    /// Reads section `id`'s maximum from the table (its row created at 0 when missing) and puts
    /// it in memory, evicting an idle section first if the cap is reached.
    pub(super) async fn load<K, S>(
        this: &Arc<Inner>,
        which: fn(&Inner) -> &Map<K, S>,
        id: K,
        key: &SeqKey,
        deadline: Instant,
    ) -> Result<(), SeqError>
    where
        K: Copy + Eq + std::hash::Hash + Into<u64> + Send + Sync + 'static,
        S: Fresh,
    {
        let unavailable = |cause: String| SeqError::Unavailable {
            key: key.to_string(),
            cause,
        };
        let _turn = tokio::time::timeout_at(deadline, this.loading.lock())
            .await
            .map_err(|_| unavailable(waited(this.options.store_timeout, "a section load")))?;
        // A set stopped while this load waited its turn is not loaded (stop_set drains loads
        // by taking the same turn).
        this.check_set(set_of(id.into()), key)?;
        if read(which(this)).contains_key(&id) {
            return Ok(());
        }
        if this.sections() >= this.options.max_sections && !this.evict_one() {
            return Err(SeqError::Full {
                key: key.to_string(),
                what: format!("{} sections", this.options.max_sections),
                setting: "seq.max_sections",
            });
        }
        let row = i64::try_from(id.into()).expect("section numbers fit in i64");
        // A section that went back is refused from memory, its row read again once a second.
        if let Some(refused) = this.floors.refused((S::KIND, row), key) {
            return Err(refused);
        }
        let max = tokio::time::timeout_at(deadline, this.db.seq_load(S::KIND, row, 0))
            .await
            .map_err(|_| unavailable(waited(this.options.store_timeout, "a section load")))?
            .map_err(|e| unavailable(e.to_string()))?;
        this.floors
            .check((S::KIND, row), max, key)
            .await
            .map_err(|e| this.unguarded(key, e))?;
        let max = u64::try_from(max).map_err(|_| SeqError::Fenced {
            key: key.to_string(),
            why: format!("section {row} of vesta_seq holds max_seq {max}, below 0"),
        })?;
        let section = Section::new(S::KIND, row, max, this.options.step, S::fresh(this, max));
        which(this)
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, Arc::new(section));
        this.loads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Raises `section` until its maximum covers `need`, by `deadline`.
    pub(super) async fn raise<S: Slots>(
        &self,
        section: &Section<S>,
        need: u64,
        deadline: Instant,
        key: &SeqKey,
    ) -> Result<(), SeqError> {
        let unavailable = |cause: String| SeqError::Unavailable {
            key: key.to_string(),
            cause,
        };
        loop {
            if section.max() >= need {
                return Ok(());
            }
            if let Some(why) = section.fenced() {
                return Err(SeqError::Fenced {
                    key: key.to_string(),
                    why: why.to_owned(),
                });
            }
            let Ok(_turn) = tokio::time::timeout_at(deadline, section.raising.lock()).await else {
                self.raise_failures.fetch_add(1, Ordering::Relaxed);
                return Err(unavailable(waited(self.options.store_timeout, "a raise")));
            };
            // A set stopped while this raise waited its turn is raised no more (stop_set drains
            // raises by taking the same turn).
            self.check_set(set_of(section.id as u64), key)?;
            let from = section.max();
            if from >= need {
                return Ok(());
            }
            let Some(to) = raise_target(from, need, section.step(), LIMIT) else {
                return Err(SeqError::Exhausted {
                    key: key.to_string(),
                });
            };
            let started = Instant::now();
            let cas = tokio::time::timeout_at(
                deadline,
                self.db
                    .seq_raise(section.kind, section.id, from as i64, to as i64, self.token),
            )
            .await;
            let row = (section.kind, section.id);
            match cas {
                Ok(Ok(Cas::Done)) => {
                    // Remembered where a restore cannot reach it before a number goes out.
                    if let Err(e) = self.floors.record(row, to).await {
                        self.raise_failures.fetch_add(1, Ordering::Relaxed);
                        return Err(self.unguarded(key, e));
                    }
                    section.raised(to);
                    section.adapt(
                        std::time::Instant::now(),
                        self.options.step,
                        self.options.max_step,
                    );
                    self.raises.fetch_add(1, Ordering::Relaxed);
                    let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                    self.raise_micros.fetch_add(micros, Ordering::Relaxed);
                }
                // Our own raise whose answer was lost did commit: the row is ours.
                Ok(Ok(Cas::Moved(Some((found, owner)))))
                    if owner == self.token && found >= from as i64 =>
                {
                    if let Err(e) = self.floors.record(row, found as u64).await {
                        self.raise_failures.fetch_add(1, Ordering::Relaxed);
                        return Err(self.unguarded(key, e));
                    }
                    section.raised(found as u64);
                }
                // Below what this process last wrote (or this host remembers): the table went
                // back, it was not raised by another.
                Ok(Ok(Cas::Moved(Some((found, _))))) if found < from as i64 => {
                    let (floor, remembered) = match self.floors.floor(row).await {
                        Ok((f, at)) if f >= from => (f, at),
                        _ => (from, "by this server".into()),
                    };
                    // Fenced for the calls holding it; dropped from memory, so the next call
                    // loads it again, refused while the row stays below (the guard's state,
                    // not a fence: served again once the table is raised back).
                    let why = super::error::went_back(row.0, row.1, found, floor, &remembered);
                    let e = self.floors.note(row, found, floor, remembered, key);
                    if section.fenced().is_none() {
                        section.fence(why);
                    }
                    self.forget(section.kind, section.id);
                    return Err(e);
                }
                Ok(Ok(Cas::Moved(found))) => {
                    let why = match found {
                        Some((v, _)) => format!(
                            "section {} (kind {}) of vesta_seq holds max_seq {v}, not the {from} \
                             this server last wrote: another process raised it (two servers on \
                             one table?); this server serves its keys no more",
                            section.id, section.kind
                        ),
                        None => format!(
                            "section {} (kind {}) of vesta_seq is gone from the table; this \
                             server serves its keys no more",
                            section.id, section.kind
                        ),
                    };
                    // Once per section: its keys are refused from here on, and the log says why.
                    tracing::error!(section = section.id, kind = section.kind, "{why}");
                    section.fence(why.clone());
                    self.fenced.fetch_add(1, Ordering::Relaxed);
                    return Err(SeqError::Fenced {
                        key: key.to_string(),
                        why,
                    });
                }
                Ok(Err(e)) => {
                    self.raise_failures.fetch_add(1, Ordering::Relaxed);
                    return Err(unavailable(e.to_string()));
                }
                Err(_) => {
                    self.raise_failures.fetch_add(1, Ordering::Relaxed);
                    return Err(unavailable(waited(self.options.store_timeout, "a raise")));
                }
            }
        }
    }

    /// Raises `section` one step ahead of need, in the background.
    pub(super) fn prefetch<S: Slots>(this: &Arc<Inner>, section: Arc<Section<S>>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            section.prefetched();
            return;
        };
        let inner = Arc::clone(this);
        runtime.spawn(async move {
            let deadline = Instant::now() + inner.options.store_timeout;
            let need = section.max().saturating_add(1);
            // A failure is counted; the call that needs the raise tries again and reports it.
            let _ = inner.raise(&section, need, deadline, &SeqKey::Num(0)).await;
            section.prefetched();
        });
    }
}

impl Inner {
    /// The refusal of `key` when the restore guard could not be read or written (`e`): a
    /// member whose coordinator keeps its floors and is out of reach is about to lapse (its
    /// renewals go there too), so its clients wait and retry as for a lapsed term; anything
    /// else is the table's trouble. A section that went back stays that.
    fn unguarded(&self, key: &SeqKey, e: SeqError) -> SeqError {
        match (e, self.gate.get().map(|g| g.of)) {
            (e @ SeqError::WentBack { .. }, _) => e,
            (SeqError::Cluster(cause), Some(crate::cluster::GateOf::Member(member))) => {
                tracing::warn!("the cluster's coordinator keeps the floors: {cause}");
                SeqError::Lapsed {
                    key: key.to_string(),
                    member,
                }
            }
            (e, _) => SeqError::Unavailable {
                key: key.to_string(),
                cause: e.to_string(),
            },
        }
    }
}

fn waited(limit: Duration, what: &str) -> String {
    format!(
        "no answer within {} ms ({TIMEOUT_KEY}) for {what}",
        limit.as_millis()
    )
}
