//! The response body: small bodies whole, `/genids` and `/segments/{tag}` written lazily in
//! chunks of at most [`CHUNK_BYTES`]. Every chunk stays accounted for until hyper drops it (sent, or the stream or
//! connection is gone):
//!
//! - it keeps its request open on the connection's [`Activity`](crate::activity::Activity)
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
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use vesta_core::{Form, IdBatch};

mod chunk;
mod json;

pub use chunk::Chunk;
use chunk::Held;
use json::{IdsJson, Run};

use crate::activity::RequestGuard;
use crate::budget::Reservation;

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

#[cfg(test)]
mod tests;
