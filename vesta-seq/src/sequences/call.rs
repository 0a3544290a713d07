//! One call: the fast path (a map lookup and the key's slot moved, behind the cluster's gate)
//! and, when the key's section is not in memory, not raised far enough, or has no room for a
//! new key under the memory bound, the rest of the call ([`PendingNext`]), which waits for the
//! table or makes room within `store_timeout`.

use std::sync::Arc;

use tokio::time::Instant;

use super::map::{Map, SectionId, read};
use super::shape::{Shape, on_place};
use super::{Inner, SeqError};
use crate::key::SeqKey;
use crate::section::{Section, Take};
use crate::slots::{Numbers, Slots, Strings};

/// What the fast path found.
enum Found<S> {
    /// The call's last number may be handed out.
    Ready(u64),
    /// It may once the section is raised to it.
    Wait(Arc<Section<S>>, u64),
    /// The section is not in memory.
    Absent,
    /// The key is new and does not fit under the memory bound.
    Full,
}

/// A call under way: taken, waiting for its section.
enum State {
    /// A numeric section's or a spread bucket's raise to the number.
    Num(Arc<Section<Numbers>>, u64),
    /// A string bucket's raise to the number.
    Str(Arc<Section<Strings>>, u64),
    /// The section's load (nothing taken yet).
    Absent,
    /// Room for a new key (nothing taken yet).
    Full,
}

/// A state of a call for a section of slots `S`.
trait Waiting: Slots + Sized {
    fn waiting(section: Arc<Section<Self>>, last: u64) -> State;
}

impl Waiting for Numbers {
    fn waiting(section: Arc<Section<Self>>, last: u64) -> State {
        State::Num(section, last)
    }
}

impl Waiting for Strings {
    fn waiting(section: Arc<Section<Self>>, last: u64) -> State {
        State::Str(section, last)
    }
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
        // Each wait on the table is boxed: its future (a transaction's, kilobytes) is then
        // not part of this one, nor of `next_n`'s, nor of a caller's frame. A caller that
        // blocks on the rare `Pending` beside its fast path otherwise reserves (and probes,
        // page by page, on every call) tens of kilobytes of stack, which cost the
        // in-process bench 2× per call; a server's task holds it per connection. The
        // allocation is once per raise or load.
        loop {
            match state {
                State::Num(s, last) => {
                    Box::pin(inner.raise(&s, last, deadline, &key)).await?;
                    return Ok(last);
                }
                State::Str(s, last) => {
                    Box::pin(inner.raise(&s, last, deadline, &key)).await?;
                    return Ok(last);
                }
                State::Absent => {
                    on_place!(key.place(), |shape, id, _slot| {
                        Box::pin(Inner::load(&inner, shape, id, &key, deadline)).await?
                    });
                }
                State::Full => Box::pin(inner.make_room(&key, deadline)).await?,
            }
            match Inner::try_take(&inner, &key, n)? {
                SeqNext::Ready(last) => return Ok(last),
                SeqNext::Pending(p) => state = p.state,
            }
        }
    }
}

impl Inner {
    /// The fast part of a call of `n` numbers on `key`: what [`Sequences::try_next_n`](super::Sequences::try_next_n) says.
    #[inline]
    pub(super) fn try_take(this: &Arc<Inner>, key: &SeqKey, n: u64) -> Result<SeqNext, SeqError> {
        let place = key.place();
        this.check_set(place.set(), key)?;
        let state = on_place!(place, |shape, id, slot| {
            match Inner::find(this, shape, id, slot, n, key)? {
                Found::Ready(last) => return Ok(SeqNext::Ready(last)),
                Found::Wait(s, last) => Waiting::waiting(s, last),
                Found::Absent => State::Absent,
                Found::Full => State::Full,
            }
        });
        Ok(SeqNext::Pending(PendingNext {
            inner: Arc::clone(this),
            key: key.clone(),
            n,
            state,
        }))
    }

    /// Takes `n` numbers for `slot` in section `id` of `shape`, if it is in memory.
    #[inline]
    fn find<K, S>(
        this: &Arc<Inner>,
        shape: &Shape<K, S>,
        id: K,
        slot: &S::Key,
        n: u64,
        key: &SeqKey,
    ) -> Result<Found<S>, SeqError>
    where
        K: SectionId,
        S: Slots,
    {
        let map: &Map<K, S> = (shape.map)(this);
        let map = read(map);
        let Some(s) = map.get(&id) else {
            return Ok(Found::Absent);
        };
        if let Some(why) = s.fenced() {
            return Err(fenced(key, why));
        }
        match s.take(slot, n) {
            Take::Ready(last) => {
                if s.wants_prefetch(last, s.step() / 2) {
                    Inner::prefetch(this, Arc::clone(s));
                }
                Ok(Found::Ready(last))
            }
            Take::Wait(last) => Ok(Found::Wait(Arc::clone(s), last)),
            Take::Full => Ok(Found::Full),
        }
    }

    /// In a cluster, refuses a key whose set is not served here (see [`cluster`](crate::cluster)).
    pub(super) fn check_gate(&self, key: &SeqKey) -> Result<(), SeqError> {
        self.check_set(key.place().set(), key)
    }

    /// [`Inner::check_gate`] for a set known already.
    #[inline]
    pub(super) fn check_set(&self, set: u32, key: &SeqKey) -> Result<(), SeqError> {
        match self.gate.get() {
            Some(gate) => gate.check(set, key),
            None => Err(unserved(key)),
        }
    }
}

/// A call on a section that serves no more.
#[cold]
fn fenced(key: &SeqKey, why: &str) -> SeqError {
    SeqError::Fenced {
        key: key.to_string(),
        why: why.to_owned(),
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
