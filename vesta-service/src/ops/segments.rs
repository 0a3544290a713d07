//! The ops on the segment store (segment mode, `[segment] db`): one number of a tag, or a
//! batch as ranges of consecutive numbers. A warm buffer answers now (a map lookup and one
//! atomic add); otherwise the answer waits on the store, never on a worker, at most
//! `segment.wait_ms` (or fails fast while the database is down). Numbers are counted in
//! `vesta_segment_numbers_issued_total` when they are handed over.

use std::ops::Range;
use std::sync::Arc;

use vesta_core::Clock;
use vesta_segment::MAX_BATCH;

use super::{Answer, ErrorKind, Later, OpError, Service, Turn, check_count};
use crate::segments::Segments;

impl<C: Clock + 'static> Service<C> {
    /// The segment store, or the refusal of a server without one
    /// ([`ErrorKind::NotConfigured`]): what every segment op checks first.
    pub fn segments_on(&self) -> Result<&Arc<Segments>, OpError> {
        self.segments.as_ref().ok_or_else(|| {
            OpError::new(
                ErrorKind::NotConfigured,
                "segment mode is off: this server has no segment database ([segment] db in its \
                 config)",
            )
        })
    }

    /// The largest segment batch: `max_batch`, and never above the store's cap.
    pub fn max_segment_batch(&self) -> u64 {
        self.limits.max_batch.min(MAX_BATCH)
    }

    /// The next number of `tag`. With [`Turn::Now`] it is taken now when buffered; with
    /// [`Turn::Queued`] nothing is taken before the answer is polled.
    #[inline]
    pub fn segment_number(&self, tag: &str, turn: Turn) -> Answer<u64> {
        let segments = match self.segments_on() {
            Ok(s) => s,
            Err(e) => return Answer::Now(Err(e)),
        };
        if turn == Turn::Now {
            match segments.store() {
                Ok(store) => {
                    if let Some(n) = store.next_buffered(tag) {
                        segments.issued(1);
                        return Answer::Now(Ok(n));
                    }
                }
                Err(e) => return Answer::Now(Err(e.into())),
            }
        }
        let s = Arc::clone(segments);
        let tag = tag.to_owned();
        let later = Later::new(async move {
            let n = s.store()?.next(&tag).await?;
            s.issued(1);
            Ok(n)
        });
        match turn {
            Turn::Now => later.polled_once(),
            Turn::Queued => Answer::Later(later),
        }
    }

    /// `count` numbers of `tag` (1..=[`max_segment_batch`](Self::max_segment_batch)) as
    /// increasing ranges of consecutive numbers. With `max_ranges` the answer holds at most
    /// that many ranges and may hold fewer numbers (at least one; a bounded wire answer),
    /// without it exactly `count`. [`Turn`] as for [`segment_number`](Self::segment_number).
    pub fn segment_numbers(
        &self,
        tag: &str,
        count: u64,
        max_ranges: Option<usize>,
        turn: Turn,
    ) -> Answer<Vec<Range<u64>>> {
        let segments = match self.segments_on() {
            Ok(s) => s,
            Err(e) => return Answer::Now(Err(e)),
        };
        if let Err(e) = check_count(count, self.max_segment_batch()) {
            return Answer::Now(Err(e));
        }
        if turn == Turn::Now
            && let Err(e) = segments.store()
        {
            return Answer::Now(Err(e.into()));
        }
        let s = Arc::clone(segments);
        let tag = tag.to_owned();
        let later = Later::new(async move {
            let store = s.store()?;
            let ranges = match max_ranges {
                Some(max) => store.next_n_within(&tag, count, max).await?,
                None => store.next_n(&tag, count).await?,
            };
            s.issued(ranges.iter().map(|r| r.end - r.start).sum());
            Ok(ranges)
        });
        match turn {
            Turn::Now => later.polled_once(),
            Turn::Queued => Answer::Later(later),
        }
    }
}

#[cfg(test)]
mod tests {
    use vesta_core::{GenMethod, IdType};

    use super::super::testing::service;
    use super::*;

    #[tokio::test]
    async fn without_a_database_the_segment_ops_say_so() {
        let (s, _clock) = service(IdType::MaxPeak, GenMethod::Server, 10);
        for answer in [
            s.segment_number("orders", Turn::Now).map_now(|_| ()),
            s.segment_numbers("orders", 3, None, Turn::Queued)
                .map_now(|_| ()),
        ] {
            let Some(Err(e)) = answer else {
                panic!("not refused now");
            };
            assert_eq!(e.kind(), ErrorKind::NotConfigured);
            assert!(e.message().contains("[segment] db"), "{e}");
        }
    }

    impl<T> Answer<T> {
        fn map_now(self, f: impl FnOnce(T)) -> Option<Result<(), OpError>> {
            match self {
                Answer::Now(r) => Some(r.map(f)),
                Answer::Later(_) => None,
            }
        }
    }
}
