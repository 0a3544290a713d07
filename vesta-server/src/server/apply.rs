//! The server side of every op: a parsed [`Request`] onto its `vesta_service` op, and the
//! op's answer written in the connection's [`Dialect`] (or its refusal, through
//! [`refusal`](super::refusal)). Answers that are not there yet, and answers that are there
//! but come after waiting ones, join the connection's queue of [`Pending`] requests.
//!
//! Adding an op: its codec in `proto/<op>.rs`, its service op in `vesta_service::ops`, one
//! arm in [`request`] calling it, and its section in docs/protocol.md.

use std::collections::VecDeque;

use bytes::BytesMut;
use vesta_core::Clock;
use vesta_embed::Flow;
use vesta_service::ops::Turn;
use vesta_service::{Answer, ErrorKind, OpError, Service};

use super::Tcp;
use super::pending::{self, Outcome, Pending};
use super::refusal;
use crate::metrics::TcpMetrics;
use crate::proto::{
    Dialect, ErrorCode, MIN_VERSION, Request, Response, ServerInfo, ServerMachine, VERSION,
    max_ranges, op,
};

/// A connection's issuing flow and its queue of waiting requests.
pub(super) struct Queue<'a, C: Clock + 'static> {
    /// The connection's share of the issuer.
    pub flow: &'a Flow<C>,
    /// Requests whose answers are on their way, in arrival order.
    pub pending: &'a mut VecDeque<Pending>,
}

impl<C: Clock + 'static> Queue<'_, C> {
    /// How a segment op may take its numbers: now, unless earlier requests wait.
    fn turn(&self) -> Turn {
        if self.pending.is_empty() {
            Turn::Now
        } else {
            Turn::Queued
        }
    }

    /// Whether an answer that is there is written now: when nothing of the connection waits,
    /// or when the op refused the request before taking anything (a count out of range,
    /// segment mode off): answers that took IDs or numbers keep the order of the requests.
    fn now<T>(&self, r: &Result<T, OpError>) -> bool {
        self.pending.is_empty()
            || r.as_ref().is_err_and(|e| {
                matches!(
                    e.kind(),
                    ErrorKind::BadParameter | ErrorKind::NotConfigured | ErrorKind::Off
                )
            })
    }
}

/// Runs one request of a connection that shook hands in `dialect`: appends its answer to
/// `out`, or queues it.
#[inline]
pub(super) fn request<C: Clock + 'static>(
    tcp: &Tcp<C>,
    q: Queue<'_, C>,
    request_id: u32,
    request: Request,
    dialect: &Dialect,
    out: &mut BytesMut,
) {
    let (service, metrics) = (&*tcp.service, &*tcp.metrics);
    let answer = |response: Response, out: &mut BytesMut| response.encode(request_id, dialect, out);
    match request {
        Request::NextId => ids(service, metrics, q, request_id, op::NEXT_ID, 1, out),
        Request::NextIds { count } => {
            let count = u64::from(count);
            ids(service, metrics, q, request_id, op::NEXT_IDS, count, out);
        }
        Request::Hello { .. } => {
            let msg = "HELLO was already received on this connection";
            Response::encode_error(request_id, ErrorCode::BadPayload, msg, out);
        }
        Request::Ping => answer(Response::Pong, out),
        Request::Info => answer(Response::Info(describe(tcp)), out),
        Request::Explain { id } => answer(Response::Explained(service.explain(id)), out),
        Request::Make(values) => match service.make(&values) {
            Ok(id) => answer(Response::Made(id), out),
            Err(e) => refusal::refuse(request_id, op::MAKE, &e, metrics, out),
        },
        // Within the layout's range the instant is after 1970, so it is non-negative.
        Request::TransTime { time } => match service.trans_time(time) {
            Ok(at) => answer(
                Response::Time(u64::try_from(at.timestamp_millis()).unwrap_or(0)),
                out,
            ),
            Err(e) => refusal::refuse(request_id, op::TRANS_TIME, &e, metrics, out),
        },
        Request::Segment { tag } => {
            let number = service.segment_number(&tag, q.turn());
            match number {
                Answer::Now(r) if q.now(&r) => {
                    pending::answer(request_id, op::SEGMENT, Outcome::Number(r), metrics, out)
                }
                number => q
                    .pending
                    .push_back(Pending::number(request_id, op::SEGMENT, number)),
            }
        }
        Request::Segments { count, tag } => {
            let max_ranges = max_ranges(tcp.section.max_frame_bytes);
            let count = u64::from(count);
            let numbers = service.segment_numbers(&tag, count, Some(max_ranges), q.turn());
            match numbers {
                Answer::Now(r) if q.now(&r) => {
                    pending::answer(request_id, op::SEGMENTS, Outcome::Numbers(r), metrics, out)
                }
                numbers => q.pending.push_back(Pending::numbers(request_id, numbers)),
            }
        }
        Request::SeqNext { count, key } => {
            let numbers = service.seq_next(&key, u64::from(count), q.turn());
            match numbers {
                Answer::Now(r) if q.now(&r) => {
                    pending::answer(request_id, op::SEQ_NEXT, Outcome::Seq(r), metrics, out)
                }
                numbers => q.pending.push_back(Pending::seq(request_id, numbers)),
            }
        }
        // Read in turn: behind waiting requests, after the numbers they take.
        Request::SeqCurrent { key } => match service.seq_current(&key, q.turn()) {
            Answer::Now(r) if q.now(&r) => pending::answer(
                request_id,
                op::SEQ_CURRENT,
                Outcome::Number(r),
                metrics,
                out,
            ),
            current => {
                let p = Pending::number(request_id, op::SEQ_CURRENT, current);
                q.pending.push_back(p);
            }
        },
    }
}

/// `NEXT_ID` and `NEXT_IDS` (`op`): `count` IDs through the connection's flow, answered now
/// if nothing of the connection waits (or the count is refused), else queued behind the
/// waiting requests. The protocol's hot path.
#[inline]
fn ids<C: Clock + 'static>(
    service: &Service<C>,
    metrics: &TcpMetrics,
    q: Queue<'_, C>,
    request_id: u32,
    op: u8,
    count: u64,
    out: &mut BytesMut,
) {
    match service.ids(q.flow, count) {
        Answer::Now(r) if q.now(&r) => {
            pending::answer(request_id, op, Outcome::Ids(r), metrics, out)
        }
        ids => q.pending.push_back(Pending::ids(request_id, op, ids)),
    }
}

/// Answers the connection's first `HELLO` with `HELLO_OK` and returns the dialect in use, or
/// answers a fatal `UNSUPPORTED_VERSION` and returns `None` (close the connection). A server
/// whose layout is not Vesta's speaks versions 2 and up only: version 1 cannot describe it.
pub(super) fn hello<C: Clock + 'static>(
    tcp: &Tcp<C>,
    request_id: u32,
    min_version: u8,
    max_version: u8,
    out: &mut BytesMut,
) -> Option<Dialect> {
    let layout = tcp.service.issuer().layout();
    // Version 1 can only describe Vesta's layouts.
    let lowest = if layout.id_type().is_some() {
        MIN_VERSION
    } else {
        2
    };
    let version = max_version.min(VERSION);
    if min_version > max_version || version < min_version || version < lowest {
        let msg = if version >= MIN_VERSION && version < lowest {
            format!(
                "client speaks protocol versions {min_version}..={max_version}, but this server \
                 issues the {} layout, which needs version {lowest}..={VERSION}",
                layout.name()
            )
        } else {
            format!(
                "client speaks protocol versions {min_version}..={max_version}, \
                 this server {lowest}..={VERSION}"
            )
        };
        Response::encode_error(request_id, ErrorCode::UnsupportedVersion, &msg, out);
        return None;
    }
    let section = &tcp.section;
    let ok = Response::HelloOk {
        version,
        max_frame_bytes: section.max_frame_bytes,
        max_batch: crate::config::max_batch_u32(section),
        layout: Some(layout.clone()),
    };
    let dialect = Dialect::new(version, layout.clone());
    ok.encode(request_id, &dialect, out);
    Some(dialect)
}

/// Answers a first frame that is not a valid `HELLO` (fatal: the connection closes).
pub(super) fn hello_required(request_id: u32, out: &mut BytesMut) {
    let msg = "the first frame must be HELLO with magic \"VSTA\" (docs/protocol.md)";
    Response::encode_error(request_id, ErrorCode::HandshakeRequired, msg, out);
}

/// What `INFO` answers: the issuer's status, the protocol's limits, connections open now.
pub(super) fn describe<C: Clock + 'static>(tcp: &Tcp<C>) -> ServerInfo {
    let service = &tcp.service;
    let s = service.status();
    let pools = service.issuer().pools();
    ServerInfo {
        machine: s.machine as u32,
        gen_method: s.gen_method.code() as u8,
        lease_state: ServerInfo::lease_state_code(s.lease.state),
        server_pool_start: *pools.server().start() as u32,
        last_issued_time: s.last_issued_time,
        end_of_life_ms: s.end_of_life_ms,
        max_batch: crate::config::max_batch_u32(&tcp.section),
        max_frame_bytes: tcp.section.max_frame_bytes,
        connections: u32::try_from(service.connections().get()).unwrap_or(0),
        reason: s.lease.reason.unwrap_or_default(),
        layout: s.layout,
        machines: s
            .machines
            .iter()
            .map(|m| ServerMachine {
                machine: m.machine as u32,
                lease_state: ServerInfo::lease_state_code(m.lease.state),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use vesta_core::{GenMethod, IdFields, IdType, ManualClock};
    use vesta_embed::{AsyncIssuer, Issuer, IssuerConfig};
    use vesta_service::ServerSection;
    use vesta_service::ops::Limits;

    use super::*;
    use crate::config::TcpSection;
    use crate::frame;

    /// The TCP side of a service with static machine 930, layout `id_type` and `max_batch`, on
    /// a clock that stands still until the test moves it.
    fn tcp(id_type: IdType, max_batch: u64) -> (Tcp<Arc<ManualClock>>, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let mut config = IssuerConfig::default();
        config.id.id_type = Some(id_type);
        config.machine.id = Some(930);
        config.gen_method = GenMethod::Server;
        let issuer = Arc::new(Issuer::start_with_clock(config, clock.clone()).unwrap());
        clock.hold_waits(true);
        let section = TcpSection {
            max_batch,
            ..TcpSection::default()
        };
        let ids = AsyncIssuer::new(issuer, section.common().max_wait()).unwrap();
        let service = Service::new(ids, None, Limits::of(&section).unwrap());
        let tcp = Tcp {
            metrics: Arc::new(TcpMetrics::new(&service)),
            service: Arc::new(service),
            section,
        };
        (tcp, clock)
    }

    /// A connection's flow and queue, and its output.
    struct Conn {
        flow: Flow<Arc<ManualClock>>,
        pending: VecDeque<Pending>,
        out: BytesMut,
    }

    impl Conn {
        fn of(tcp: &Tcp<Arc<ManualClock>>) -> Self {
            Conn {
                flow: tcp.service.flow(),
                pending: VecDeque::new(),
                out: BytesMut::new(),
            }
        }

        fn send(&mut self, tcp: &Tcp<Arc<ManualClock>>, request_id: u32, r: Request) {
            let q = Queue {
                flow: &self.flow,
                pending: &mut self.pending,
            };
            request(tcp, q, request_id, r, &Dialect::v1(), &mut self.out);
        }

        /// The one frame in the output, parsed, with its request id.
        fn answer(&mut self) -> (u32, Response) {
            let f = frame::decode(&mut self.out, frame::MAX_MAX_FRAME_BYTES)
                .unwrap()
                .expect("a whole frame");
            assert!(self.out.is_empty(), "one frame only");
            (f.request_id, Response::parse(&f, &Dialect::v1()).unwrap())
        }
    }

    #[tokio::test]
    async fn next_id_is_answered_at_once_while_the_unit_has_room() {
        let (tcp, _clock) = tcp(IdType::MaxPeak, 10);
        let mut c = Conn::of(&tcp);
        c.send(&tcp, 3, Request::NextId);
        assert!(c.pending.is_empty());
        let (3, Response::Id(id)) = c.answer() else {
            panic!("not ID");
        };
        assert_eq!(IdFields::decode(id).machine, 930);
        assert_eq!(tcp.service.ids_issued(), 1);
    }

    #[tokio::test]
    async fn a_used_up_unit_queues_requests_in_order_until_the_next_unit() {
        // Min-granularity: 1024 IDs per millisecond, and the manual clock stands still.
        let (tcp, clock) = tcp(IdType::MinGranularity, 1500);
        let batch = tcp.service.issuer().try_next_ids(1024).unwrap();
        let mut c = Conn::of(&tcp);
        c.send(&tcp, 3, Request::NextId);
        assert!(
            c.out.is_empty() && c.pending.len() == 1,
            "nothing answered yet"
        );
        // Later requests of the same connection queue behind it.
        c.send(&tcp, 4, Request::NextId);
        c.send(&tcp, 5, Request::NextIds { count: 1500 });
        assert_eq!(c.pending.len(), 3);
        clock.advance(1);
        for expected in [3, 4] {
            let mut p = c.pending.pop_front().unwrap();
            let ids = p.outcome().await;
            p.answer(ids, &tcp.metrics, &mut c.out);
            let (id, Response::Id(x)) = c.answer() else {
                panic!("not ID");
            };
            assert_eq!(id, expected);
            assert!(x > batch.runs()[0].first, "after the batch");
        }
        clock.advance(1);
        let mut p = c.pending.pop_front().unwrap();
        let ids = p.outcome().await;
        p.answer(ids, &tcp.metrics, &mut c.out);
        let (5, Response::Ids(runs)) = c.answer() else {
            panic!("not IDS");
        };
        let ids: Vec<u64> = runs.iter().flat_map(|r| r.iter()).collect();
        assert_eq!(ids.len(), 1500);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing");
    }

    #[tokio::test]
    async fn a_count_of_zero_or_above_the_cap_is_refused_whether_or_not_requests_wait() {
        let (tcp, clock) = tcp(IdType::MinGranularity, 10);
        tcp.service.issuer().try_next_ids(1024).unwrap();
        let mut c = Conn::of(&tcp);
        c.send(&tcp, 1, Request::NextIds { count: 5 });
        assert_eq!(c.pending.len(), 1, "the unit is used up: it waits");
        for waiting in [1, 0] {
            if waiting == 0 {
                c.pending.clear();
            }
            for count in [0, 11] {
                c.send(&tcp, 7, Request::NextIds { count });
                let message = format!("NEXT_IDS count {count} is out of range: allowed 1..=10");
                let code = ErrorCode::InvalidArgument;
                assert_eq!(c.answer(), (7, Response::Error { code, message }));
                assert_eq!(c.pending.len(), waiting, "nothing queued");
            }
        }
        clock.advance(1);
    }

    #[tokio::test]
    async fn an_issuer_refusal_keeps_its_place_behind_waiting_requests() {
        let (tcp, clock) = tcp(IdType::MinGranularity, 10);
        tcp.service.issuer().try_next_ids(1024).unwrap();
        let mut c = Conn::of(&tcp);
        c.send(&tcp, 3, Request::NextId);
        let lost = "the machine-ID lease was lost";
        tcp.service
            .issuer()
            .fence_for_test(vesta_embed::LeaseState::Fenced, lost);
        c.send(&tcp, 4, Request::NextId);
        assert!(c.out.is_empty(), "nothing answered ahead of request 3");
        assert_eq!(c.pending.len(), 2);
        clock.advance(1);
        for expected in [3, 4] {
            let mut p = c.pending.pop_front().unwrap();
            let outcome = p.outcome().await;
            p.answer(outcome, &tcp.metrics, &mut c.out);
            let (id, Response::Error { code, .. }) = c.answer() else {
                panic!("not refused");
            };
            assert_eq!((id, code), (expected, ErrorCode::Unavailable));
        }
    }

    #[tokio::test]
    async fn without_a_database_the_segment_ops_answer_segments_off() {
        let (tcp, _clock) = tcp(IdType::MaxPeak, 10);
        let mut c = Conn::of(&tcp);
        c.send(
            &tcp,
            5,
            Request::Segment {
                tag: "orders".into(),
            },
        );
        let (5, Response::Error { code, message }) = c.answer() else {
            panic!("not an error");
        };
        assert_eq!(code, ErrorCode::SegmentsOff);
        assert!(message.contains("[segment] db"), "{message}");
        let many = Request::Segments {
            count: 3,
            tag: "orders".into(),
        };
        c.send(&tcp, 6, many);
        assert!(matches!(
            c.answer(),
            (
                6,
                Response::Error {
                    code: ErrorCode::SegmentsOff,
                    ..
                }
            )
        ));
        assert!(c.pending.is_empty());
    }
}
