//! One connection of the TCP server (mini-redis's `Handler`): reads frames, hands each
//! request to its op in [`apply`](super::apply), keeps the requests whose answers are on their
//! way in arrival order ([`Pending`]), writes all answers of one read in one write, and closes
//! with a last frame (a fatal error or `GOAWAY`) on a broken stream, the idle timeout or a
//! shutdown.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::time::{Instant, sleep_until, timeout};
use tracing::debug;
use vesta_core::Clock;
use vesta_embed::Flow;
use vesta_service::shutdown::Shutdown;
use vesta_service::tls::{ServerTls, Stream};

use super::apply::{self, Queue};
use super::pending::{Outcome, Pending};
use super::{Tcp, refusal};
use crate::connection::Connection;
use crate::frame::{Frame, FrameError};
use crate::proto::{Dialect, ErrorCode, Request, Response};

/// Serves one accepted connection until it closes.
pub(super) async fn handle<C: Clock + 'static>(
    stream: TcpStream,
    peer: SocketAddr,
    tcp: Arc<Tcp<C>>,
    shutdown: Shutdown,
    tls: Option<ServerTls>,
) {
    // Counted (in `INFO` and the metrics) while it lives.
    let _open = tcp.service.connections().open();
    // The handshake is bounded like a frame: a client that says nothing gives its slot back.
    let stream = match tls {
        None => Stream::Plain(stream),
        Some(tls) => match tls.accept(stream, tcp.section.idle_timeout()).await {
            Ok(s) => s,
            Err(e) => {
                debug!(%peer, error = %e, "closed: TLS handshake");
                tcp.metrics.tls_handshake_failed();
                return;
            }
        },
    };
    let mut h = Handler {
        conn: Connection::new(stream, tcp.section.max_frame_bytes),
        flow: tcp.service.flow(),
        tcp,
        shutdown,
        pending: VecDeque::new(),
        dialect: None,
        farewell: None,
    };
    if let Err(e) = h.run().await {
        debug!(%peer, error = %e, "connection ended");
    }
}

/// The state of one connection.
struct Handler<C: Clock + 'static> {
    conn: Connection,
    tcp: Arc<Tcp<C>>,
    /// This connection's share of the issuer: its waiting requests take turns with others'.
    flow: Flow<C>,
    shutdown: Shutdown,
    /// ID and segment requests whose answers are on their way, answered in arrival order.
    pending: VecDeque<Pending>,
    /// The version agreed in the handshake and the server's layout; `None` before `HELLO`.
    dialect: Option<Dialect>,
    /// The last frame before closing: a fatal error or `GOAWAY`.
    farewell: Option<Response>,
}

/// Whether to go on reading after a frame.
enum Next {
    Continue,
    /// A fatal error: answer what came before, then close.
    Close,
}

impl<C: Clock + 'static> Handler<C> {
    async fn run(&mut self) -> std::io::Result<()> {
        let idle = self.tcp.section.idle_timeout();
        let mut reading = true;
        let mut idle_deadline = Instant::now() + idle;
        loop {
            while reading {
                match self.conn.next_frame() {
                    Ok(Some(frame)) => {
                        idle_deadline = Instant::now() + idle;
                        if let Next::Close = self.on_frame(frame) {
                            reading = false;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        self.fatal(frame_error_code(&e), &e.to_string());
                        reading = false;
                    }
                }
            }
            if self.conn.has_output() {
                // A client that does not read its answers is dropped after the idle timeout.
                timeout(idle, self.conn.flush())
                    .await
                    .map_err(|_| std::io::Error::other("write blocked past the idle timeout"))??;
            }
            if !reading && self.pending.is_empty() {
                if let Some(f) = self.farewell.take() {
                    // Errors and GOAWAY read the same in every version.
                    f.encode(0, &Dialect::v1(), self.conn.out());
                }
                return timeout(idle, self.conn.close())
                    .await
                    .map_err(|_| std::io::Error::other("close blocked"))?;
            }
            let max_pending =
                usize::try_from(self.tcp.section.max_pending_per_connection).unwrap_or(usize::MAX);
            let waiting = !self.pending.is_empty();
            tokio::select! {
                biased;
                () = self.shutdown.recv(), if reading => {
                    reading = false;
                    self.goaway(ErrorCode::ShuttingDown, "the server is shutting down");
                }
                outcome = first_ready(&mut self.pending), if waiting => {
                    self.answer_ready(outcome);
                }
                read = self.conn.fill(), if reading && self.pending.len() < max_pending => {
                    if read? == 0 {
                        // The peer closed its side: answer what waits, then close.
                        reading = false;
                    }
                }
                () = sleep_until(idle_deadline), if reading && !waiting => {
                    reading = false;
                    let msg = if self.conn.has_partial_frame() {
                        "a frame stayed incomplete past the idle timeout"
                    } else {
                        "no request within the idle timeout"
                    };
                    self.goaway(ErrorCode::IdleTimeout, msg);
                }
            }
        }
    }

    /// The first waiting request's answer arrived: answer it, then every following one whose
    /// answer is there too, in order.
    fn answer_ready(&mut self, first: Outcome) {
        let mut ready = Some(first);
        while let Some(mut p) = self.pending.pop_front() {
            let Some(r) = ready.take().or_else(|| p.try_take()) else {
                self.pending.push_front(p);
                return;
            };
            p.answer(r, &self.tcp.metrics, self.conn.out());
        }
    }

    fn goaway(&mut self, code: ErrorCode, message: &str) {
        if self.farewell.is_none() {
            self.farewell = Some(Response::GoAway {
                code,
                message: message.to_owned(),
            });
        }
    }

    /// A fatal error about the stream itself, sent with request id 0 just before closing.
    fn fatal(&mut self, code: ErrorCode, message: &str) {
        self.farewell = Some(Response::Error {
            code,
            message: message.to_owned(),
        });
    }

    /// Runs one frame: parses it in the connection's dialect, then hands it to its op in
    /// [`apply`], which appends the answer or parks it.
    fn on_frame(&mut self, frame: Frame) -> Next {
        let id = frame.request_id;
        let Some(dialect) = &self.dialect else {
            let out = self.conn.out();
            return match Request::parse(&frame, &Dialect::v1()) {
                Ok(Request::Hello {
                    min_version,
                    max_version,
                }) => match apply::hello(&self.tcp, id, min_version, max_version, out) {
                    Some(dialect) => {
                        self.dialect = Some(dialect);
                        Next::Continue
                    }
                    None => Next::Close,
                },
                _ => {
                    apply::hello_required(id, out);
                    Next::Close
                }
            };
        };
        let request = Request::parse(&frame, dialect);
        let out = self.conn.out();
        let metrics = &self.tcp.metrics;
        if id == 0 {
            let msg = "request id 0 is reserved for frames the server sends on its own";
            refusal::send(0, ErrorCode::InvalidArgument, msg, metrics, out);
            return Next::Continue;
        }
        match request {
            Ok(request) => {
                metrics.request(request.op());
                let queue = Queue {
                    flow: &self.flow,
                    pending: &mut self.pending,
                };
                apply::request(&self.tcp, queue, id, request, dialect, out);
            }
            Err(e) => refusal::send(id, e.code(), &e.to_string(), metrics, out),
        }
        Next::Continue
    }
}

/// The answer of the first waiting request, once it is there.
async fn first_ready(pending: &mut VecDeque<Pending>) -> Outcome {
    match pending.front_mut() {
        Some(p) => p.outcome().await,
        None => std::future::pending().await,
    }
}

fn frame_error_code(e: &FrameError) -> ErrorCode {
    match e {
        FrameError::TooShort { .. } => ErrorCode::MalformedFrame,
        FrameError::TooLarge { .. } => ErrorCode::FrameTooLarge,
    }
}
