//! The ops on the per-key sequences (`[seq] db`): a key's next numbers, and its current one.
//! A key whose section is in memory and covers the call answers now (a map lookup and one
//! atomic add); otherwise the answer waits for the table (a section's load or raise), at most
//! `seq.store_timeout_ms`. Numbers are counted in `vesta_seq_numbers_issued_total` when they
//! are handed over.

use vesta_core::{Clock, Remedy};
use vesta_seq::{SeqError, SeqKey, SeqNext, Sequences};

use super::{Answer, ErrorKind, Later, OpError, SeqOwner, Service, Turn, check_count};

/// What a call on a key answers: the last number of the call, and how many it moved by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqNumbers {
    /// The last number (the only one, for a count of 1).
    pub last: u64,
    /// How many numbers the call took: `last - count + 1 ..= last`.
    pub count: u64,
}

impl SeqNumbers {
    /// The first number of the call.
    pub fn first(&self) -> u64 {
        self.last + 1 - self.count
    }
}

impl<C: Clock + 'static> Service<C> {
    /// The per-key sequences, or the refusal of a server without them
    /// ([`ErrorKind::NotConfigured`]).
    pub fn seq_on(&self) -> Result<&Sequences, OpError> {
        self.seq.as_ref().ok_or_else(|| {
            OpError::new(
                ErrorKind::NotConfigured,
                format!(
                    "per-key sequences are off: this server has no sequence database ({})",
                    Remedy::ServeSequences
                ),
            )
        })
    }

    /// Per-key sequence numbers handed out since start, all transports
    /// (`vesta_seq_numbers_issued_total`).
    pub fn seq_numbers_issued(&self) -> u64 {
        self.seq_issued.get()
    }

    /// The largest batch of one key: the sequences' step.
    pub fn max_seq_batch(&self) -> u64 {
        self.seq.as_ref().map_or(1, |s| s.options().step)
    }

    /// `count` numbers (1..=[`max_seq_batch`](Self::max_seq_batch), the one limit every
    /// transport meets, refused naming `count` and the range) of the key `key` names (its
    /// bytes as sent: a decimal `u64` or UTF-8 text). With [`Turn::Now`] they are taken now
    /// when the key's section covers them; with [`Turn::Queued`] nothing is taken before the
    /// answer is polled.
    pub fn seq_next(&self, key: &[u8], count: u64, turn: Turn) -> Answer<SeqNumbers> {
        let seqs = match self.seq_on() {
            Ok(s) => s,
            Err(e) => return Answer::Now(Err(e)),
        };
        if let Err(e) = check_count(count, seqs.options().step) {
            return Answer::Now(Err(e));
        }
        let key = match SeqKey::parse(key) {
            Ok(k) => k,
            Err(e) => return Answer::Now(Err(SeqError::from(e).into())),
        };
        // The counter is shared only by an answer that waits: the ready path counts in place.
        let later = |issued: prometheus_client::metrics::counter::Counter| {
            move |last: u64| {
                issued.inc_by(count);
                SeqNumbers { last, count }
            }
        };
        match turn {
            Turn::Now => match seqs.try_next_n(&key, count) {
                Ok(SeqNext::Ready(last)) => {
                    self.seq_issued.inc_by(count);
                    Answer::Now(Ok(SeqNumbers { last, count }))
                }
                Ok(SeqNext::Pending(p)) => {
                    let handed = later(self.seq_issued.clone());
                    Answer::Later(Later::new(async move { Ok(handed(p.wait().await?)) }))
                }
                Err(e) => Answer::Now(Err(e.into())),
            },
            Turn::Queued => {
                let (seqs, handed) = (seqs.clone(), later(self.seq_issued.clone()));
                Answer::Later(Later::new(async move {
                    Ok(handed(seqs.next_n(&key, count).await?))
                }))
            }
        }
    }

    /// The current number of the key, without moving it (see
    /// [`Sequences::current`]: a section not in memory is loaded first). With [`Turn::Queued`]
    /// it is read when the answer is first polled, after the requests ahead of it.
    pub fn seq_current(&self, key: &[u8], turn: Turn) -> Answer<u64> {
        let seqs = match self.seq_on() {
            Ok(s) => s.clone(),
            Err(e) => return Answer::Now(Err(e)),
        };
        let key = match SeqKey::parse(key) {
            Ok(k) => k,
            Err(e) => return Answer::Now(Err(SeqError::from(e).into())),
        };
        let later = Later::new(async move { Ok(seqs.current(&key).await?) });
        match turn {
            Turn::Now => later.polled_once(),
            Turn::Queued => Answer::Later(later),
        }
    }
}

/// A sequence refusal: a bad key or count names its parameter; the table's failures are 503s
/// (worth a retry unless the section is fenced); a memory bound reached is saturation.
impl From<SeqError> for OpError {
    fn from(e: SeqError) -> Self {
        let message = e.to_string();
        match &e {
            SeqError::Key(_) => OpError::bad_parameter("key", message),
            SeqError::Count { .. } => OpError::bad_parameter("count", message),
            SeqError::Unavailable { .. } | SeqError::Store(_) | SeqError::Guard(_) => {
                OpError::new(ErrorKind::StoreDown, message).retry_after(Some(1))
            }
            // The table went back: refused until an operator raises it (no retry helps sooner).
            SeqError::WentBack { .. } => OpError::new(ErrorKind::StoreDown, message),
            // Room frees when the calls holding the sections end: within store_timeout.
            SeqError::Full { retry_after_s, .. } => {
                OpError::new(ErrorKind::Saturated, message).retry_after(Some(*retry_after_s))
            }
            SeqError::Fenced { .. } | SeqError::Exhausted { .. } | SeqError::Layout { .. } => {
                OpError::new(ErrorKind::StoreDown, message)
            }
            SeqError::Moved {
                set,
                member,
                tcp,
                rest,
                ..
            } => OpError::moved(
                SeqOwner {
                    member: *member,
                    set: *set,
                    tcp: tcp.clone(),
                    rest: rest.clone(),
                },
                message,
            ),
            // A term not confirmed in time, a member's or the table's: served again once a
            // renewal is (clients wait it out within their retry budget, as for a hand-off).
            SeqError::Moving { .. } | SeqError::Lapsed { .. } | SeqError::TableLapsed { .. } => {
                OpError::new(ErrorKind::Moving, message).retry_after(Some(1))
            }
            _ => OpError::internal(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use vesta_core::{GenMethod, IdType};
    use vesta_seq::{KeyError, SeqKey};

    use super::super::testing::service;
    use super::*;

    #[tokio::test]
    async fn without_a_database_the_seq_ops_say_so() {
        let (s, _clock) = service(IdType::MaxPeak, GenMethod::Server, 10);
        let Answer::Now(Err(e)) = s.seq_next(b"42", 1, Turn::Now) else {
            panic!("not refused now");
        };
        assert_eq!(e.kind(), ErrorKind::NotConfigured);
        assert!(e.message().contains("[seq] db"), "{e}");
        let Answer::Now(Err(e)) = s.seq_current(b"42", Turn::Now) else {
            panic!("not refused now");
        };
        assert_eq!(e.kind(), ErrorKind::NotConfigured);
    }

    #[test]
    fn refusals_get_their_kinds_and_fields() {
        let key: KeyError = SeqKey::parse(b"").unwrap_err();
        let e = OpError::from(SeqError::from(key));
        assert_eq!(
            (e.kind(), e.field()),
            (ErrorKind::BadParameter, Some("key"))
        );
        let e = OpError::from(SeqError::Count { count: 0, max: 10 });
        assert_eq!(e.field(), Some("count"));
        let e = OpError::from(SeqError::Unavailable {
            key: "42".into(),
            cause: "down".into(),
        });
        assert_eq!(
            (e.kind(), e.retry_after_s()),
            (ErrorKind::StoreDown, Some(1))
        );
        let e = OpError::from(SeqError::Fenced {
            key: "42".into(),
            why: "moved".into(),
        });
        assert_eq!((e.kind(), e.retry_after_s()), (ErrorKind::StoreDown, None));
        assert_eq!(
            SeqNumbers { last: 10, count: 3 }.first(),
            8,
            "a batch of 3 ending at 10"
        );
    }
}
