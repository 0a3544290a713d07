//! The ops on the issuer: IDs and batches through a connection's [`Flow`] (answered now while
//! the time unit has sequence left, else at a later unit boundary, taking turns with other
//! connections, or `Saturated` after `server.max_wait_ms`), explain, make (refused while
//! `[server] make = false`) and trans-time.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use chrono::{DateTime, Utc};
use prometheus_client::metrics::counter::Counter;
use vesta_core::{Clock, Explanation, FieldValues, IdBatch};
use vesta_embed::{Flow, Issue, IssueError};

use super::{Answer, OpError, Service, check_count};

impl<C: Clock + 'static> Service<C> {
    /// `count` IDs (1..=`max_batch`) through the connection's `flow`, as contiguous runs in
    /// issue order. Counted in `vesta_ids_issued_total` when they are handed over.
    #[inline]
    pub fn ids(&self, flow: &Flow<C>, count: u64) -> Answer<IdBatch, IdsLater> {
        if let Err(e) = check_count(count, self.limits.max_batch) {
            return Answer::Now(Err(e));
        }
        let mut issue = flow.issue(count);
        match issue.ready() {
            Some(ready) => Answer::Now(counted(&self.issued, ready)),
            None => Answer::Later(IdsLater {
                issue,
                issued: self.issued.clone(),
            }),
        }
    }

    /// An ID read in the server's layout, every field by name.
    pub fn explain(&self, id: u64) -> Explanation {
        self.issuer().explain(id)
    }

    /// An ID of the server's layout made from `values` (to repair data), every value
    /// range-checked ([`ErrorKind::OutOfRange`](super::ErrorKind::OutOfRange) names the
    /// field); refused while `[server] make = false`.
    pub fn make(&self, values: &FieldValues) -> Result<u64, OpError> {
        self.check_make()?;
        Ok(self.issuer().make(values)?)
    }

    /// An ID of the server's layout made from fields given by name (gRPC's `Make`, a map):
    /// every name one of the layout's ([`params`](crate::make::params)), `time` and `seq`
    /// required, the other fields the server's own unless given, every value range-checked;
    /// refused while `[server] make = false`. A name the layout has not is refused naming the
    /// request's `fields`.
    pub fn make_from_fields(&self, fields: &HashMap<String, u64>) -> Result<u64, OpError> {
        self.check_make()?;
        let issuer = self.issuer();
        let values = crate::make::values_from_fields(issuer.layout(), fields, &issuer.own_values())
            .map_err(|e| OpError::bad_parameter("fields", e.message))?;
        self.make(&values)
    }

    /// The instant the time value `time` of the server's layout starts.
    pub fn trans_time(&self, time: u64) -> Result<DateTime<Utc>, OpError> {
        Ok(self.issuer().trans_time(time)?)
    }
}

/// IDs on their way to a unit boundary; counted when they arrive. Await it, or take it
/// without waiting ([`try_take`](IdsLater::try_take)).
#[derive(Debug)]
pub struct IdsLater {
    issue: Issue,
    issued: Counter,
}

impl IdsLater {
    /// The IDs if they have arrived, without waiting.
    pub fn try_take(&mut self) -> Option<Result<IdBatch, OpError>> {
        let r = self.issue.try_take()?;
        Some(counted(&self.issued, r))
    }
}

impl Future for IdsLater {
    type Output = Result<IdBatch, OpError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        Pin::new(&mut this.issue)
            .poll(cx)
            .map(|r| counted(&this.issued, r))
    }
}

/// The issuer's answer, its IDs counted.
#[inline]
fn counted(issued: &Counter, r: Result<IdBatch, IssueError>) -> Result<IdBatch, OpError> {
    match r {
        Ok(batch) => {
            issued.inc_by(batch.len());
            Ok(batch)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use vesta_core::{GenMethod, IdFields, IdType};

    use super::super::testing::service;
    use super::*;
    use crate::ops::ErrorKind;

    #[tokio::test]
    async fn ids_are_counted_now_or_when_they_arrive() {
        // Min-granularity: 1024 IDs per millisecond, and the manual clock stands still.
        let (s, clock) = service(IdType::MinGranularity, GenMethod::Server, 1500);
        let flow = s.flow();
        let Answer::Now(Ok(batch)) = s.ids(&flow, 1000) else {
            panic!("the unit has room");
        };
        assert_eq!(IdFields::decode(batch.runs()[0].first).machine, 930);
        assert_eq!(s.ids_issued(), 1000);
        let Answer::Later(mut later) = s.ids(&flow, 100) else {
            panic!("24 left in the unit: it waits");
        };
        assert!(later.try_take().is_none());
        clock.advance(1);
        let batch = later.await.unwrap();
        assert_eq!(batch.len(), 100);
        assert_eq!(s.ids_issued(), 1100);
    }

    #[tokio::test]
    async fn counts_outside_the_cap_and_make_when_off_are_refused() {
        let (s, _clock) = service(IdType::MaxPeak, GenMethod::Server, 10);
        let flow = s.flow();
        for count in [0, 11] {
            let Answer::Now(Err(e)) = s.ids(&flow, count) else {
                panic!("{count} accepted");
            };
            assert_eq!(e.kind(), ErrorKind::BadParameter);
            assert_eq!(
                e.message(),
                format!("count {count} is out of range: allowed 1..=10")
            );
        }
        let e = s.trans_time(u64::MAX).unwrap_err();
        assert_eq!((e.kind(), e.field()), (ErrorKind::OutOfRange, Some("time")));
    }
}
