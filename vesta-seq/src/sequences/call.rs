//! One call: the fast path (a map lookup and one atomic add on the key's slot, behind the
//! cluster's gate) and, when the key's section is not in memory or not raised far enough, the
//! rest of the call ([`PendingNext`]), which waits for the table within `store_timeout`.

use std::sync::Arc;

use tokio::time::Instant;

use super::map::{Map, read};
use super::{Inner, SeqError};
use crate::key::{Place, SeqKey};
use crate::section::{Dense, Section, Slots, Sparse, Take};

/// What the fast path found.
enum Found<S> {
    /// The call's last number may be handed out.
    Ready(u64),
    /// It may once the section is raised to it.
    Wait(Arc<Section<S>>, u64),
    /// The section is not in memory.
    Absent,
}

/// A call under way: taken, waiting for its section.
enum State {
    /// A numeric section's raise to the number.
    Num(Arc<Section<Dense>>, u64),
    /// A string bucket's raise to the number.
    Str(Arc<Section<Sparse>>, u64),
    /// The section's load (nothing taken yet).
    Absent,
}

/// What [`Sequences::try_next_n`](super::Sequences::try_next_n) got.
pub enum SeqNext {
    /// The last number of the call, handed out.
    Ready(u64),
    /// The rest of the call: its section's load or raise.
    Pending(PendingNext),
}

/// A call waiting for the table: [`PendingNext::wait`] finishes it within `store_timeout`.
pub struct PendingNext {
    inner: Arc<Inner>,
    key: SeqKey,
    n: u64,
    state: State,
}

impl std::fmt::Debug for PendingNext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PendingNext({}, {})", self.key, self.n)
    }
}

impl PendingNext {
    /// Waits for the section (at most `store_timeout` in all) and returns the call's last
    /// number, or why it could not be handed out.
    pub async fn wait(self) -> Result<u64, SeqError> {
        let PendingNext {
            inner,
            key,
            n,
            mut state,
        } = self;
        let deadline = Instant::now() + inner.options.store_timeout;
        loop {
            match state {
                State::Num(s, last) => {
                    inner.raise(&s, last, deadline, &key).await?;
                    return Ok(last);
                }
                State::Str(s, last) => {
                    inner.raise(&s, last, deadline, &key).await?;
                    return Ok(last);
                }
                State::Absent => {
                    match key.place() {
                        Place::Num { section, .. } => {
                            Inner::load(&inner, |i| &i.numeric, section, &key, deadline).await?;
                        }
                        Place::Str { bucket } => {
                            Inner::load(&inner, |i| &i.strings, bucket, &key, deadline).await?;
                        }
                    }
                    match Inner::try_take(&inner, &key, n)? {
                        SeqNext::Ready(last) => return Ok(last),
                        SeqNext::Pending(p) => state = p.state,
                    }
                }
            }
        }
    }
}

impl Inner {
    /// The fast part of a call of `n` numbers on `key`: what [`Sequences::try_next_n`](super::Sequences::try_next_n) says.
    pub(super) fn try_take(this: &Arc<Inner>, key: &SeqKey, n: u64) -> Result<SeqNext, SeqError> {
        this.check_gate(key)?;
        let state = match (key.place(), key) {
            (Place::Num { section, slot }, _) => {
                match Inner::find(this, &this.numeric, section, &slot, n, key)? {
                    Found::Ready(last) => return Ok(SeqNext::Ready(last)),
                    Found::Wait(s, last) => State::Num(s, last),
                    Found::Absent => State::Absent,
                }
            }
            (Place::Str { bucket }, SeqKey::Str(k)) => {
                match Inner::find(this, &this.strings, bucket, &**k, n, key)? {
                    Found::Ready(last) => return Ok(SeqNext::Ready(last)),
                    Found::Wait(s, last) => State::Str(s, last),
                    Found::Absent => State::Absent,
                }
            }
            (Place::Str { .. }, SeqKey::Num(_)) => {
                unreachable!("a numeric key has a numeric place")
            }
        };
        Ok(SeqNext::Pending(PendingNext {
            inner: Arc::clone(this),
            key: key.clone(),
            n,
            state,
        }))
    }

    /// Takes `n` numbers for `slot` in section `id` of `map`, if it is in memory.
    fn find<K, S>(
        this: &Arc<Inner>,
        map: &Map<K, S>,
        id: K,
        slot: &S::Key,
        n: u64,
        key: &SeqKey,
    ) -> Result<Found<S>, SeqError>
    where
        K: Copy + Eq + std::hash::Hash,
        S: Slots,
    {
        let map = read(map);
        let Some(s) = map.get(&id) else {
            return Ok(Found::Absent);
        };
        if let Some(why) = s.fenced() {
            return Err(SeqError::Fenced {
                key: key.to_string(),
                why: why.to_owned(),
            });
        }
        match s.take(slot, n) {
            Take::Ready(last) => {
                if s.wants_prefetch(last, s.step() / 2) {
                    Inner::prefetch(this, Arc::clone(s));
                }
                Ok(Found::Ready(last))
            }
            Take::Wait(last) => Ok(Found::Wait(Arc::clone(s), last)),
            Take::Full => Err(SeqError::Full {
                key: key.to_string(),
                what: format!("{} string keys", this.options.max_string_keys),
                setting: "seq.max_string_keys",
            }),
        }
    }

    /// In a cluster, refuses a key whose set is not served here (see [`cluster`]).
    pub(super) fn check_gate(&self, key: &SeqKey) -> Result<(), SeqError> {
        match self.gate.get() {
            Some(gate) => gate.check(key.set().get(), key),
            None => Err(unserved(key)),
        }
    }

    /// [`Inner::check_gate`] for a set known already.
    pub(super) fn check_set(&self, set: u32, key: &SeqKey) -> Result<(), SeqError> {
        match self.gate.get() {
            Some(gate) => gate.check(set, key),
            None => Err(unserved(key)),
        }
    }
}

/// A member's sequences before they joined a cluster serve nothing.
#[cold]
fn unserved(key: &SeqKey) -> SeqError {
    SeqError::Cluster(format!(
        "key {key}: these sequences were opened as a cluster member and serve nothing until they \
         join the cluster"
    ))
}
