//! One client connection: requests from any number of callers are pipelined on it. Callers
//! append their frame to a shared write buffer and wait on a oneshot; a writer task sends
//! whatever accumulated in one write, a reader task matches answers to callers by request id.
//!
//! When the connection breaks, every caller still waiting gets [`AttemptError::Lost`] exactly
//! once, and its late answer (if any ever came) would find nobody: an answer is delivered to at
//! most one caller, so a retry elsewhere can never duplicate an ID.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::error::AttemptError;
use crate::frame::{self, MAX_MAX_FRAME_BYTES};
use crate::proto::{MIN_VERSION, Request, Response, VERSION};

type Reply = oneshot::Sender<Result<Response, AttemptError>>;

/// What the server said in its handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    /// Largest frame length.
    pub max_frame_bytes: u32,
    /// Largest `NEXT_IDS` count.
    pub max_batch: u32,
}

struct State {
    inflight: HashMap<u32, Reply>,
    /// Why the connection is unusable, once it is.
    closed: Option<String>,
    next_id: u32,
    wbuf: BytesMut,
}

struct Shared {
    state: Mutex<State>,
    wake_writer: Notify,
    /// Set on `GOAWAY`: send nothing more here.
    draining: AtomicBool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the connection broken and fails every waiting caller once.
    fn fail(&self, reason: &str) {
        let waiting: Vec<Reply> = {
            let mut st = self.state();
            if st.closed.is_none() {
                st.closed = Some(reason.to_owned());
            }
            st.inflight.drain().map(|(_, tx)| tx).collect()
        };
        for tx in waiting {
            let _ = tx.send(Err(AttemptError::Lost(reason.to_owned())));
        }
        self.wake_writer.notify_one();
    }
}

/// A pipelined connection to one server.
pub(crate) struct Conn {
    shared: Arc<Shared>,
    permits: Semaphore,
    hello: Hello,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("hello", &self.hello)
            .field("usable", &self.is_usable())
            .finish_non_exhaustive()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.shared.fail("connection dropped");
        self.reader.abort();
        self.writer.abort();
    }
}

impl Conn {
    /// Connects and shakes hands within `connect_timeout`.
    pub(crate) async fn connect(
        addr: &str,
        connect_timeout: Duration,
        max_in_flight: usize,
    ) -> Result<Conn, AttemptError> {
        let fut = async {
            let mut stream = TcpStream::connect(addr)
                .await
                .map_err(|e| AttemptError::Connect(format!("{addr}: {e}")))?;
            let _ = stream.set_nodelay(true);
            let hello = handshake(&mut stream)
                .await
                .map_err(|e| AttemptError::Connect(format!("{addr}: {e}")))?;
            Ok::<_, AttemptError>((stream, hello))
        };
        let (stream, hello) = timeout(connect_timeout, fut).await.map_err(|_| {
            AttemptError::Connect(format!(
                "{addr}: no handshake within {} ms",
                connect_timeout.as_millis()
            ))
        })??;
        let (r, w) = stream.into_split();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                inflight: HashMap::new(),
                closed: None,
                next_id: 1,
                wbuf: BytesMut::with_capacity(16 << 10),
            }),
            wake_writer: Notify::new(),
            draining: AtomicBool::new(false),
        });
        let reader = tokio::spawn(read_loop(r, shared.clone(), hello.max_frame_bytes));
        let writer = tokio::spawn(write_loop(w, shared.clone()));
        Ok(Conn {
            shared,
            permits: Semaphore::new(max_in_flight.max(1)),
            hello,
            reader,
            writer,
        })
    }

    /// The server's handshake answer.
    pub(crate) fn hello(&self) -> Hello {
        self.hello
    }

    /// True while new requests may be sent on it.
    pub(crate) fn is_usable(&self) -> bool {
        !self.shared.draining.load(Ordering::Acquire) && self.shared.state().closed.is_none()
    }

    /// Closes it, failing whatever waits on it (e.g. after a request timed out).
    pub(crate) fn close(&self, reason: &str) {
        self.shared.fail(reason);
    }

    /// Sends `request` and waits for its answer (an `ERROR` answer is `Ok(Response::Error)`).
    pub(crate) async fn call(
        &self,
        request: &Request,
        request_timeout: Duration,
    ) -> Result<Response, AttemptError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| AttemptError::Lost("connection closed".into()))?;
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut st = self.shared.state();
            if let Some(reason) = &st.closed {
                return Err(AttemptError::Lost(reason.clone()));
            }
            if self.shared.draining.load(Ordering::Acquire) {
                return Err(AttemptError::Lost("the server said GOAWAY".into()));
            }
            let mut id = st.next_id;
            // Skip 0 (reserved) and any id still waiting after a wrap-around.
            while id == 0 || st.inflight.contains_key(&id) {
                id = id.wrapping_add(1);
            }
            st.next_id = id.wrapping_add(1);
            st.inflight.insert(id, tx);
            request.encode(id, &mut st.wbuf);
            id
        };
        self.shared.wake_writer.notify_one();
        match timeout(request_timeout, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(AttemptError::Lost("connection closed".into())),
            Err(_) => {
                self.shared.state().inflight.remove(&id);
                // A server that does not answer in time is treated as gone: close the
                // connection so the others waiting on it fail over too.
                let ms = request_timeout.as_millis() as u64;
                self.close(&format!("no answer within {ms} ms"));
                Err(AttemptError::Timeout(ms))
            }
        }
    }
}

/// Sends `HELLO` and reads `HELLO_OK` (the only frame the server sends first).
async fn handshake(stream: &mut TcpStream) -> Result<Hello, String> {
    let mut out = BytesMut::new();
    Request::Hello {
        min_version: MIN_VERSION,
        max_version: VERSION,
    }
    .encode(1, &mut out);
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    let mut buf = BytesMut::with_capacity(256);
    loop {
        match frame::decode(&mut buf, MAX_MAX_FRAME_BYTES).map_err(|e| e.to_string())? {
            Some(f) => {
                return match Response::parse(&f).map_err(|e| e.to_string())? {
                    Response::HelloOk {
                        max_frame_bytes,
                        max_batch,
                        ..
                    } => Ok(Hello {
                        max_frame_bytes,
                        max_batch,
                    }),
                    Response::Error { code, message } | Response::GoAway { code, message } => {
                        Err(format!("{message} ({code})"))
                    }
                    other => Err(format!("expected HELLO_OK, got {other:?}")),
                };
            }
            None => {
                if stream.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
                    return Err("closed during the handshake".into());
                }
            }
        }
    }
}

async fn write_loop(mut w: OwnedWriteHalf, shared: Arc<Shared>) {
    let mut spare = BytesMut::with_capacity(16 << 10);
    loop {
        shared.wake_writer.notified().await;
        loop {
            {
                let mut st = shared.state();
                if st.closed.is_some() {
                    return;
                }
                std::mem::swap(&mut st.wbuf, &mut spare);
            }
            if spare.is_empty() {
                break;
            }
            if let Err(e) = w.write_all(&spare).await {
                shared.fail(&format!("write failed: {e}"));
                return;
            }
            spare.clear();
        }
    }
}

async fn read_loop(mut r: OwnedReadHalf, shared: Arc<Shared>, max_frame_bytes: u32) {
    let mut buf = BytesMut::with_capacity(64 << 10);
    let reason = loop {
        match frame::decode(&mut buf, max_frame_bytes) {
            Ok(Some(f)) => {
                let answer = match Response::parse(&f) {
                    Ok(a) => a,
                    Err(e) => break format!("bad answer from the server: {e}"),
                };
                match answer {
                    Response::GoAway { code, message } => {
                        shared.draining.store(true, Ordering::Release);
                        tracing::debug!(%code, %message, "server said GOAWAY");
                    }
                    Response::Error { code, message } if f.request_id == 0 => {
                        break format!("{message} ({code})");
                    }
                    answer => {
                        let tx = shared.state().inflight.remove(&f.request_id);
                        if let Some(tx) = tx {
                            let _ = tx.send(Ok(answer));
                        }
                    }
                }
            }
            Ok(None) => {
                if buf.capacity() - buf.len() < 4096 {
                    buf.reserve(64 << 10);
                }
                match r.read_buf(&mut buf).await {
                    Ok(0) => break "closed by the server".to_owned(),
                    Ok(_) => {}
                    Err(e) => break format!("read failed: {e}"),
                }
            }
            Err(e) => break format!("bad frame from the server: {e}"),
        }
    };
    shared.fail(&reason);
}
