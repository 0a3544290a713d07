//! Why an op gave no answer: one error type for every op and every transport. Its
//! [`ErrorKind`] is what a transport maps to its own answer (an HTTP status, a TCP error
//! code, Leaf's `Result{id=CODE}`), each in one place; its message is the one sentence the
//! client reads, naming the field, tag or setting at fault.

use vesta_core::{FieldError, GenError};
use vesta_embed::IssueError;
use vesta_segment::SegmentError;

/// What kind of refusal an [`OpError`] is: all a transport needs to pick its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A parameter the caller chose is refused ([`OpError::field`] names it): a count out of
    /// range, a tag outside the naming rule.
    BadParameter,
    /// A field value the layout cannot hold, in `make` or `trans-time` ([`OpError::field`]
    /// names it).
    OutOfRange,
    /// The op is switched off on this server (`[server] make = false`).
    Off,
    /// The op needs something this server is not configured with (segment mode without
    /// `[segment] db`).
    NotConfigured,
    /// A segment tag with no row in `leaf_alloc`.
    UnknownTag,
    /// The issuer is not issuing now (lease not held, fenced, shut down): another server or a
    /// later try may succeed.
    Unavailable,
    /// The clock is behind the last issued ID beyond the rollback tolerance.
    ClockBehind,
    /// The layout's time field is full: this layout issues no more IDs.
    TimeExhausted,
    /// The clock reads before the layout's epoch.
    BeforeEpoch,
    /// An ID request waited `server.max_wait_ms` for sequence space.
    Saturated,
    /// The segment store is open but has no number now: both segments of the tag used up
    /// and the database down or slower than `segment.wait_ms`, or a segment refused.
    NoSegment,
    /// The segment store is not open: its database not reached yet, a database error, or
    /// the store shut down.
    StoreDown,
    /// A per-key sequence's set is served by another member of the cluster:
    /// [`OpError::owner`] says which, and where.
    Moved,
    /// A per-key sequence's set is between members of the cluster: retry shortly.
    Moving,
    /// A bug: the server keeps serving.
    Internal,
}

/// The member of a sequences cluster that serves a key ([`ErrorKind::Moved`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqOwner {
    /// The member (its machine ID).
    pub member: u64,
    /// The key's set.
    pub set: u32,
    /// Its TCP server's address (`""`: none).
    pub tcp: String,
    /// Its REST server's address (`""`: none).
    pub rest: String,
}

/// An op's refusal: its kind, the field at fault if any, the sentence, and whether waiting
/// is likely to help.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct OpError {
    kind: ErrorKind,
    field: Option<String>,
    message: String,
    retry_after_s: Option<u64>,
    owner: Option<Box<SeqOwner>>,
}

impl OpError {
    /// A refusal of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        OpError {
            kind,
            field: None,
            message: message.into(),
            retry_after_s: None,
            owner: None,
        }
    }

    /// A key served by another member of the sequences cluster.
    pub fn moved(owner: SeqOwner, message: impl Into<String>) -> Self {
        OpError {
            owner: Some(Box::new(owner)),
            ..Self::new(ErrorKind::Moved, message)
        }
    }

    /// Who serves the key ([`ErrorKind::Moved`]).
    pub fn owner(&self) -> Option<&SeqOwner> {
        self.owner.as_deref()
    }

    /// The parameter `field` refused; `message` names it again ("count 0 is out of range:
    /// allowed 1..=10").
    pub fn bad_parameter(field: impl Into<String>, message: impl Into<String>) -> Self {
        OpError {
            field: Some(field.into()),
            ..Self::new(ErrorKind::BadParameter, message)
        }
    }

    /// `count` outside `1..=max` (the message as every transport words it).
    pub fn count_out_of_range(count: u64, max: u64) -> Self {
        Self::bad_parameter(
            "count",
            format!("count {count} is out of range: allowed 1..={max}"),
        )
    }

    /// A bug, saying what happened.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// With a retry hint of `seconds` (a `Retry-After` for HTTP).
    pub fn retry_after(mut self, seconds: Option<u64>) -> Self {
        self.retry_after_s = seconds;
        self
    }

    /// The kind, which decides the answer.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The parameter or field at fault ([`ErrorKind::BadParameter`], [`ErrorKind::OutOfRange`]).
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The sentence the client reads.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Seconds after which a retry is likely to succeed, when it is.
    pub fn retry_after_s(&self) -> Option<u64> {
        self.retry_after_s
    }
}

/// An issuer's refusal. The transient ones (lease not held yet, saturated, clock behind)
/// carry a retry hint of one second.
impl From<IssueError> for OpError {
    fn from(e: IssueError) -> Self {
        let kind = match &e {
            IssueError::Unavailable(_) => ErrorKind::Unavailable,
            IssueError::Saturated { .. } => ErrorKind::Saturated,
            IssueError::Refused(g) => match g {
                GenError::ClockBehind { .. } => ErrorKind::ClockBehind,
                GenError::TimeOverflow { .. } => ErrorKind::TimeExhausted,
                GenError::BeforeEpoch { .. } => ErrorKind::BeforeEpoch,
                // `WouldBlock` never reaches a server (the waiting list waits it out).
                GenError::Fenced { .. } | GenError::WouldBlock { .. } => ErrorKind::Unavailable,
                // A refusal added after this crate: no kind of its own yet.
                _ => ErrorKind::Internal,
            },
            _ => ErrorKind::Internal,
        };
        let retry = e.is_transient().then_some(1);
        OpError::new(kind, e.to_string()).retry_after(retry)
    }
}

/// A segment store's refusal.
impl From<SegmentError> for OpError {
    fn from(e: SegmentError) -> Self {
        let message = e.to_string();
        match &e {
            SegmentError::InvalidTag { .. } => OpError::bad_parameter("tag", message),
            SegmentError::OutOfRange { field, .. } => OpError::bad_parameter(*field, message),
            SegmentError::UnknownTag { .. } => OpError::new(ErrorKind::UnknownTag, message),
            SegmentError::Unavailable { .. }
            | SegmentError::Timeout { .. }
            | SegmentError::WouldBlock { .. } => {
                OpError::new(ErrorKind::NoSegment, message).retry_after(Some(1))
            }
            // Refused until an operator raises the tag: no point retrying soon.
            SegmentError::Inconsistent { .. } | SegmentError::MovedBack { .. } => {
                OpError::new(ErrorKind::NoSegment, message)
            }
            SegmentError::Unreachable { .. }
            | SegmentError::Database { .. }
            | SegmentError::MissingTable { .. } => {
                OpError::new(ErrorKind::StoreDown, message).retry_after(Some(1))
            }
            SegmentError::Closed => OpError::new(ErrorKind::StoreDown, message),
            _ => OpError::internal(message),
        }
    }
}

/// A field value the layout cannot hold (`make`, `trans-time`).
impl From<FieldError> for OpError {
    fn from(e: FieldError) -> Self {
        OpError {
            field: Some(e.field().to_owned()),
            ..OpError::new(ErrorKind::OutOfRange, e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_refusals_get_their_kinds() {
        let e = OpError::from(SegmentError::InvalidTag {
            tag: "a b".into(),
            reason: "character ' ' is not allowed".into(),
        });
        assert_eq!(
            (e.kind(), e.field()),
            (ErrorKind::BadParameter, Some("tag"))
        );
        let e = OpError::from(SegmentError::UnknownTag {
            tag: "x".into(),
            db: "sqlite://d".into(),
        });
        assert_eq!(e.kind(), ErrorKind::UnknownTag);
        assert!(e.message().contains("unknown tag \"x\""), "{e}");
        let e = OpError::from(SegmentError::Timeout {
            tag: "x".into(),
            waited_ms: 5,
        });
        assert_eq!(
            (e.kind(), e.retry_after_s()),
            (ErrorKind::NoSegment, Some(1))
        );
        let e = OpError::from(SegmentError::Closed);
        assert_eq!((e.kind(), e.retry_after_s()), (ErrorKind::StoreDown, None));
    }

    #[test]
    fn issuer_refusals_get_their_kinds() {
        let e = OpError::from(IssueError::Saturated { waited_ms: 3 });
        assert_eq!(
            (e.kind(), e.retry_after_s()),
            (ErrorKind::Saturated, Some(1))
        );
        let e = OpError::from(IssueError::Unavailable("fenced".into()));
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        let e = OpError::count_out_of_range(0, 10);
        assert_eq!(e.message(), "count 0 is out of range: allowed 1..=10");
        assert_eq!(e.field(), Some("count"));
    }
}
