//! The response body: small bodies whole, `/genids` and `/segments/{tag}` written lazily in
//! chunks of at most [`CHUNK_BYTES`]. Every chunk stays accounted for until hyper drops it (sent, or the stream or
//! connection is gone):
//!
//! - it keeps its request open on the connection's [`Activity`](crate::connection::Activity)
//!   (so a connection with a response stuck behind a zero window is not idle, but stalled) and
//!   records progress when it goes;
//! - a `/genids` (or `/segments`) body holds a [`Reservation`] of the server's unsent-bytes budget and never has
//!   more than that reservation ([`STREAM_WINDOW_BYTES`] at most) in chunks alive at once, however
//!   little window its client grants; the body of a million IDs costs no more than one of a
//!   thousand.
//!
//! Bodies of at most [`SMALL_BODY_BYTES`] (single IDs, explanations, errors) are not charged to
//! the budget, so a polite `/genid` still works while slow clients hold all of it.

use std::convert::Infallible;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body::{Frame, SizeHint};
use vesta_core::{Form, IdBatch, IdRun};

use crate::budget::Reservation;
use crate::connection::RequestGuard;

/// Largest chunk of a streamed body: one HTTP/2 DATA frame of the default size.
pub const CHUNK_BYTES: usize = 16 * 1024;
/// Most bytes of one streamed body alive in chunks at once (two chunks: one being sent, one
/// ready), and so the most a `/genids` response reserves of the budget.
pub const STREAM_WINDOW_BYTES: usize = 2 * CHUNK_BYTES;
/// Bodies up to this size are not charged to the budget.
pub const SMALL_BODY_BYTES: usize = 1024;

/// What a chunk keeps alive: the request (open until its last chunk goes) and its reservation.
#[derive(Debug, Default)]
struct Hold {
    request: Option<RequestGuard>,
    _reservation: Option<Reservation>,
}

/// A response body; see the module doc.
#[derive(Debug)]
pub struct Body {
    kind: Kind,
    hold: Hold,
}

#[derive(Debug)]
enum Kind {
    /// The whole body, until it is taken.
    Whole(Option<Bytes>),
    /// `/genids`, written as hyper asks for it.
    Ids {
        json: IdsJson,
        /// Most bytes alive in chunks at once.
        window: usize,
        /// Made at the first poll, from the body's hold; shared with the chunks.
        streaming: Option<Arc<Streaming>>,
    },
    /// A gRPC answer (tonic's body: messages, then trailers), passed on a frame at a time;
    /// the next frame is taken from tonic only once the bytes alive are under the window, so
    /// a stream's issuing follows its client's reading.
    #[cfg(feature = "grpc")]
    Grpc {
        body: tonic::body::Body,
        streaming: Option<Arc<Streaming>>,
        done: bool,
    },
}

/// Shared by a streamed body and its chunks.
#[derive(Debug)]
struct Streaming {
    hold: Hold,
    /// Bytes in chunks alive now, at most `window`.
    alive: AtomicUsize,
    window: usize,
    /// The body, waiting for a chunk to go.
    waker: AtomicWaker,
}

impl Streaming {
    /// The state a streamed body shares with its chunks, made at its first poll from its
    /// `hold`; at most `window` bytes alive in chunks at once.
    fn start<'a>(
        slot: &'a mut Option<Arc<Streaming>>,
        hold: &mut Hold,
        window: usize,
    ) -> &'a Arc<Self> {
        slot.get_or_insert_with(|| {
            Arc::new(Streaming {
                hold: std::mem::take(hold),
                alive: AtomicUsize::new(0),
                window,
                waker: AtomicWaker::new(),
            })
        })
    }

    /// `bytes` as a chunk counted alive until hyper drops it.
    fn chunk(self: &Arc<Self>, bytes: Bytes) -> Chunk {
        let len = bytes.len();
        self.alive.fetch_add(len, Ordering::AcqRel);
        Chunk {
            bytes,
            len,
            held: Held::Streamed(Arc::clone(self)),
        }
    }
}

impl Body {
    /// A body sent as one piece (uncharged if at most [`SMALL_BODY_BYTES`]; see [`Body::charged`]).
    pub fn whole(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        debug_assert!(
            bytes.len() <= SMALL_BODY_BYTES,
            "an uncharged body of {} bytes: charge it to the budget",
            bytes.len()
        );
        Body {
            kind: Kind::Whole(Some(bytes)),
            hold: Hold::default(),
        }
    }

    /// A body sent as one piece, whose bytes are counted in `reservation` until sent.
    pub fn charged(bytes: Bytes, reservation: Reservation) -> Self {
        Body {
            kind: Kind::Whole(Some(bytes)),
            hold: Hold {
                request: None,
                _reservation: Some(reservation),
            },
        }
    }

    /// `{"ids":["…",…]}` of `batch`, written in chunks; at most what `reservation` holds
    /// ([`Body::ids_reservation`] bytes) is alive in chunks at once. Each ID is written in `form` (`?format=`; decimal by default).
    pub fn ids_in(batch: &IdBatch, reservation: Reservation, form: Form) -> Self {
        let runs = batch.runs().iter().map(Run::of_ids).collect();
        Self::runs(runs, reservation, form)
    }

    /// `{"ids":["…",…]}` of segment numbers (consecutive within each range), streamed like
    /// [`Body::ids_in`].
    pub fn numbers(ranges: &[Range<u64>], reservation: Reservation) -> Self {
        let runs = ranges.iter().map(Run::of_numbers).collect();
        Self::runs(runs, reservation, Form::Decimal)
    }

    fn runs(runs: Vec<Run>, reservation: Reservation, form: Form) -> Self {
        Body {
            kind: Kind::Ids {
                json: IdsJson::new(runs, form),
                // A chunk never exceeds the rest of the body, so this window never blocks a
                // body whose reservation covers it whole.
                window: reservation.bytes().clamp(1, STREAM_WINDOW_BYTES),
                streaming: None,
            },
            hold: Hold {
                request: None,
                _reservation: Some(reservation),
            },
        }
    }

    /// A gRPC answer's body, passed on as hyper asks for it (see [`Kind::Grpc`]).
    #[cfg(feature = "grpc")]
    pub fn grpc(body: tonic::body::Body) -> Self {
        Body {
            kind: Kind::Grpc {
                body,
                streaming: None,
                done: false,
            },
            hold: Hold::default(),
        }
    }

    /// Ties the request to this body: it stays open on its connection until the body's last
    /// chunk is gone.
    pub fn hold_request(&mut self, request: RequestGuard) {
        self.hold.request = Some(request);
    }

    /// What a `/genids` (or `/segments`) body of `count` IDs reserves of the budget before they
    /// are issued: its largest possible length, at most [`STREAM_WINDOW_BYTES`].
    pub fn ids_reservation(count: u64) -> usize {
        Self::ids_upper_bound(count).min(STREAM_WINDOW_BYTES)
    }

    fn ids_upper_bound(count: u64) -> usize {
        let per_id = 20 + 3; // digits, quotes, comma
        usize::try_from(count)
            .unwrap_or(usize::MAX)
            .saturating_mul(per_id)
            .saturating_add(IdsJson::FRAME_BYTES)
    }
}

impl http_body::Body for Body {
    type Data = Chunk;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Chunk>, Infallible>>> {
        let this = self.get_mut();
        match &mut this.kind {
            Kind::Whole(bytes) => Poll::Ready(bytes.take().map(|bytes| {
                let len = bytes.len();
                let hold = std::mem::take(&mut this.hold);
                Ok(Frame::data(Chunk {
                    bytes,
                    len,
                    held: Held::Whole { _kept: hold },
                }))
            })),
            Kind::Ids {
                json,
                window,
                streaming,
            } => {
                if json.is_done() {
                    return Poll::Ready(None);
                }
                let s = Streaming::start(streaming, &mut this.hold, *window);
                let next = json.remaining().min(CHUNK_BYTES);
                if s.alive.load(Ordering::Acquire) + next > s.window {
                    s.waker.register(cx.waker());
                    if s.alive.load(Ordering::Acquire) + next > s.window {
                        return Poll::Pending;
                    }
                }
                let bytes = json.write_chunk(CHUNK_BYTES);
                Poll::Ready(Some(Ok(Frame::data(s.chunk(bytes)))))
            }
            #[cfg(feature = "grpc")]
            Kind::Grpc {
                body,
                streaming,
                done,
            } => {
                if *done {
                    return Poll::Ready(None);
                }
                let s = Streaming::start(streaming, &mut this.hold, STREAM_WINDOW_BYTES);
                if s.alive.load(Ordering::Acquire) >= s.window {
                    s.waker.register(cx.waker());
                    if s.alive.load(Ordering::Acquire) >= s.window {
                        return Poll::Pending;
                    }
                }
                grpc_frame(http_body::Body::poll_frame(Pin::new(body), cx), s, done)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Whole(bytes) => bytes.is_none(),
            Kind::Ids { json, .. } => json.is_done(),
            #[cfg(feature = "grpc")]
            Kind::Grpc { body, done, .. } => *done || body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        let len = match &self.kind {
            Kind::Whole(bytes) => bytes.as_ref().map_or(0, Bytes::len),
            Kind::Ids { json, .. } => json.remaining(),
            #[cfg(feature = "grpc")]
            Kind::Grpc { body, .. } => return body.size_hint(),
        };
        SizeHint::with_exact(len as u64)
    }
}

/// tonic's next frame as ours: data as a chunk counted in `s`, trailers as they are, and an
/// error (rare: tonic turns a stream's refusal into trailers itself) as the trailers of its
/// status, so the client reads a gRPC status whatever happened.
#[cfg(feature = "grpc")]
fn grpc_frame(
    polled: Poll<Option<Result<Frame<Bytes>, tonic::Status>>>,
    s: &Arc<Streaming>,
    done: &mut bool,
) -> Poll<Option<Result<Frame<Chunk>, Infallible>>> {
    let frame = match polled {
        Poll::Pending => return Poll::Pending,
        Poll::Ready(None) => {
            *done = true;
            return Poll::Ready(None);
        }
        Poll::Ready(Some(Ok(frame))) => frame,
        Poll::Ready(Some(Err(status))) => {
            *done = true;
            let mut trailers = hyper::HeaderMap::new();
            if status.add_header(&mut trailers).is_err() {
                let internal = tonic::Status::internal("the answer failed");
                let _ = internal.add_header(&mut trailers);
            }
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
    };
    match frame.into_data() {
        Ok(bytes) => Poll::Ready(Some(Ok(Frame::data(s.chunk(bytes))))),
        Err(frame) => {
            *done = true;
            Poll::Ready(frame.into_trailers().ok().map(|t| Ok(Frame::trailers(t))))
        }
    }
}

/// A piece of a response body; gives back what it accounts for when hyper drops it.
#[derive(Debug)]
pub struct Chunk {
    bytes: Bytes,
    /// Its length when made (bytes shrinks as hyper sends it).
    len: usize,
    held: Held,
}

#[derive(Debug)]
enum Held {
    /// Kept alive until the chunk goes (nothing to count: a whole body is one chunk).
    Whole {
        _kept: Hold,
    },
    Streamed(Arc<Streaming>),
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if let Held::Streamed(s) = &self.held {
            s.alive.fetch_sub(self.len, Ordering::AcqRel);
            if let Some(r) = &s.hold.request {
                r.activity().progress();
            }
            s.waker.wake();
        }
    }
}

impl Buf for Chunk {
    fn remaining(&self) -> usize {
        self.bytes.remaining()
    }

    fn chunk(&self) -> &[u8] {
        self.bytes.chunk()
    }

    fn advance(&mut self, cnt: usize) {
        self.bytes.advance(cnt);
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [std::io::IoSlice<'a>]) -> usize {
        self.bytes.chunks_vectored(dst)
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        self.bytes.copy_to_bytes(len)
    }
}

/// Evenly spaced numbers: `first + k * stride` for `k < count` (a run of IDs, stride its
/// layout's step, or a range of segment numbers, stride 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    first: u64,
    count: u64,
    stride: u64,
}

impl Run {
    fn of_ids(r: &IdRun) -> Run {
        Run {
            first: r.first,
            count: r.count,
            stride: r.step,
        }
    }

    fn of_numbers(r: &Range<u64>) -> Run {
        Run {
            first: r.start,
            count: r.end.saturating_sub(r.start),
            stride: 1,
        }
    }

    fn get(&self, k: u64) -> Option<u64> {
        (k < self.count).then(|| self.first + k * self.stride)
    }
}

/// `{"ids":["…",…]}` written on demand from the runs (IDs are strings: JavaScript numbers lose
/// precision above 2^53), with its exact length known up front (for `Content-Length`).
#[derive(Debug)]
struct IdsJson {
    runs: Vec<Run>,
    /// How each ID is written.
    form: Form,
    /// Position of the next ID: run index and index within it.
    run: usize,
    k: u64,
    /// `{"ids":[` is written.
    opened: bool,
    /// At least one ID is written (the next one needs a comma).
    any: bool,
    done: bool,
    /// Exact bytes still to write.
    remaining: usize,
}

impl IdsJson {
    const OPEN: &'static [u8] = b"{\"ids\":[";
    const CLOSE: &'static [u8] = b"]}";
    const FRAME_BYTES: usize = Self::OPEN.len() + Self::CLOSE.len();

    fn new(runs: Vec<Run>, form: Form) -> Self {
        let ids: u64 = runs.iter().map(|r| r.count).sum();
        let digits: u64 = match form {
            Form::Decimal => runs.iter().map(digits_in_run).sum(),
            // The other forms have a fixed width.
            _ => ids * form.encode(0).as_str().len() as u64,
        };
        let commas = ids.saturating_sub(1);
        let len = Self::FRAME_BYTES as u64 + digits + 2 * ids + commas;
        IdsJson {
            runs,
            form,
            run: 0,
            k: 0,
            opened: false,
            any: false,
            done: false,
            remaining: usize::try_from(len).unwrap_or(usize::MAX),
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn remaining(&self) -> usize {
        self.remaining
    }

    /// The next ID, without moving past it.
    fn peek(&mut self) -> Option<u64> {
        while let Some(r) = self.runs.get(self.run) {
            if let Some(id) = r.get(self.k) {
                return Some(id);
            }
            self.run += 1;
            self.k = 0;
        }
        None
    }

    /// Up to `max` more bytes (at least one ID's worth while any are left).
    fn write_chunk(&mut self, max: usize) -> Bytes {
        let mut out = BytesMut::with_capacity(self.remaining.min(max));
        if !self.opened {
            out.put_slice(Self::OPEN);
            self.opened = true;
        }
        let mut text = itoa::Buffer::new();
        while let Some(id) = self.peek() {
            let formed;
            let digits = match self.form {
                Form::Decimal => text.format(id).as_bytes(),
                form => {
                    formed = form.encode(id);
                    formed.as_str().as_bytes()
                }
            };
            let comma = usize::from(self.any);
            if !out.is_empty() && out.len() + comma + digits.len() + 2 > max {
                break;
            }
            if self.any {
                out.put_u8(b',');
            }
            self.any = true;
            out.put_u8(b'"');
            out.put_slice(digits);
            out.put_u8(b'"');
            self.k += 1;
        }
        if self.peek().is_none() && (out.is_empty() || out.len() + Self::CLOSE.len() <= max) {
            out.put_slice(Self::CLOSE);
            self.done = true;
        }
        self.remaining -= out.len();
        debug_assert!(!self.done || self.remaining == 0, "length was miscounted");
        out.freeze()
    }
}

/// Decimal digits of all IDs of `run`, counted per power of ten rather than per ID.
fn digits_in_run(run: &Run) -> u64 {
    let mut total = 0;
    let mut k = 0;
    while k < run.count {
        let id = run.first + k * run.stride;
        let digits = u64::from(id.checked_ilog10().unwrap_or(0) + 1);
        // The first index whose ID has more digits.
        let next = match 10u64.checked_pow(digits as u32) {
            Some(bound) => (bound - run.first).div_ceil(run.stride).min(run.count),
            None => run.count,
        };
        total += (next - k) * digits;
        k = next;
    }
    total
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use http_body::Body as _;

    use super::*;
    use crate::budget::UnsentBudget;

    /// The JSON the simple way, to compare against.
    fn expected(runs: &[IdRun]) -> String {
        let ids: Vec<String> = runs
            .iter()
            .flat_map(IdRun::iter)
            .map(|id| format!("\"{id}\""))
            .collect();
        format!("{{\"ids\":[{}]}}", ids.join(","))
    }

    fn write_all(runs: Vec<IdRun>, max: usize) -> (Vec<u8>, usize) {
        write_runs(runs.iter().map(Run::of_ids).collect(), max)
    }

    fn write_runs(runs: Vec<Run>, max: usize) -> (Vec<u8>, usize) {
        let mut json = IdsJson::new(runs, Form::Decimal);
        let announced = json.remaining();
        let mut out = Vec::new();
        while !json.is_done() {
            let c = json.write_chunk(max);
            assert!(c.len() <= max.max(IdsJson::OPEN.len() + 23), "{}", c.len());
            out.extend_from_slice(&c);
        }
        (out, announced)
    }

    #[test]
    fn streamed_json_is_exact_and_its_length_known_up_front() {
        let cases = vec![
            vec![],
            vec![IdRun {
                first: 5,
                count: 1,
                step: 1,
            }],
            // Crosses from 4 to 5 and 6 digits inside one run.
            vec![IdRun {
                first: 9_000,
                count: 1_000,
                step: 1024,
            }],
            vec![
                IdRun {
                    first: 1 << 40,
                    count: 3_000,
                    step: 1024,
                },
                IdRun {
                    first: u64::MAX - 4 * 1024,
                    count: 5,
                    step: 1024,
                },
            ],
            vec![IdRun {
                first: 999_999_999_999_999_000,
                count: 10_000,
                step: 1024,
            }],
        ];
        for runs in cases {
            let want = expected(&runs);
            for max in [1, 40, 1000, CHUNK_BYTES] {
                let (got, announced) = write_all(runs.clone(), max);
                assert_eq!(String::from_utf8(got).unwrap(), want);
                assert_eq!(announced, want.len());
            }
            let n = runs.iter().map(|r| r.count).sum();
            assert!(Body::ids_upper_bound(n) >= want.len());
        }
    }

    #[test]
    fn segment_numbers_are_written_as_consecutive_strings() {
        let ranges = [0..3, 98..102, u64::MAX - 2..u64::MAX];
        let want: Vec<String> = ranges
            .iter()
            .flat_map(|r| r.clone())
            .map(|n| format!("\"{n}\""))
            .collect();
        let want = format!("{{\"ids\":[{}]}}", want.join(","));
        for max in [1, 7, CHUNK_BYTES] {
            let (got, announced) = write_runs(ranges.iter().map(Run::of_numbers).collect(), max);
            assert_eq!(String::from_utf8(got).unwrap(), want);
            assert_eq!(announced, want.len());
        }
    }

    #[tokio::test]
    async fn a_streamed_body_keeps_no_more_than_its_window_alive() {
        let budget = UnsentBudget::new(1 << 20);
        let runs = vec![IdRun {
            first: 1 << 50,
            count: 10_000,
            step: 1024,
        }];
        let batch = IdBatch::from_runs(runs.clone());
        let r = budget.reserve(Body::ids_reservation(10_000)).unwrap();
        let mut body = Box::pin(Body::ids_in(&batch, r, Form::Decimal));
        assert_eq!(body.size_hint().exact(), Some(expected(&runs).len() as u64));
        let mut held = Vec::new();
        let mut alive = 0;
        // Take chunks without dropping them, as a client that grants no window makes hyper do.
        loop {
            let polled = poll_fn(|cx| Poll::Ready(body.as_mut().poll_frame(cx))).await;
            match polled {
                Poll::Ready(Some(Ok(f))) => {
                    let c = f.into_data().unwrap();
                    alive += c.remaining();
                    held.push(c);
                }
                Poll::Pending => break,
                Poll::Ready(None) | Poll::Ready(Some(Err(_))) => panic!("ended early"),
            }
        }
        assert!(
            alive <= STREAM_WINDOW_BYTES && alive > CHUNK_BYTES,
            "{alive}"
        );
        assert_eq!(budget.in_use(), STREAM_WINDOW_BYTES);
        // Sending (dropping) the chunks lets the rest through; all of it is the exact JSON.
        let mut out: Vec<u8> = Vec::new();
        for c in held.drain(..) {
            out.extend_from_slice(c.chunk());
        }
        while let Some(f) = poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            out.extend_from_slice(f.unwrap().into_data().unwrap().chunk());
        }
        assert!(body.is_end_stream());
        assert_eq!(String::from_utf8(out).unwrap(), expected(&runs));
        drop(body);
        assert_eq!(budget.in_use(), 0);
    }
}
