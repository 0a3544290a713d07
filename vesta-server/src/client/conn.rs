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
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use vesta_core::Layout;

use super::tls::{ClientTls, Stream, plain};
use crate::error::AttemptError;
use crate::frame::{self, MAX_MAX_FRAME_BYTES};
use crate::proto::{Dialect, ErrorCode, MIN_VERSION, Request, Response, VERSION, fits_v1};

type Reply = oneshot::Sender<Result<Response, AttemptError>>;

/// What the server said in its handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    /// Largest frame length.
    pub max_frame_bytes: u32,
    /// Largest `NEXT_IDS` count.
    pub max_batch: u32,
    /// The version in use and the server's layout (version 1: Vesta's, epoch unknown).
    pub dialect: Dialect,
}

/// The layout every server of one client issues in, and its fallback issuer too: learned from
/// the first handshake (or the fallback) and checked at every later one, so a failover never
/// mixes IDs of two layouts or epochs.
#[derive(Debug, Default)]
pub(crate) struct LayoutPin(std::sync::OnceLock<Layout>);

impl LayoutPin {
    /// Pins `layout` (the fallback's) before any server is asked.
    pub(crate) fn pin(&self, layout: Layout) {
        let _ = self.0.set(layout);
    }

    /// The layout the client's servers issue in, once known.
    pub(crate) fn get(&self) -> Option<&Layout> {
        self.0.get()
    }

    /// Accepts a server at `addr` that handshook `hello`, or says why not.
    fn check(&self, addr: &str, hello: &Hello) -> Result<(), String> {
        if hello.dialect.version < 2 {
            // A version-1 server issues one of Vesta's layouts; its epoch comes with INFO.
            return match self.get() {
                Some(p) if p.id_type().is_none() => Err(format!(
                    "{addr} speaks protocol version 1 (Vesta's layouts only) but this client's \
                     servers issue the {} layout",
                    p.name()
                )),
                _ => Ok(()),
            };
        }
        let layout = &hello.dialect.layout;
        let pinned = self.0.get_or_init(|| layout.clone());
        if pinned.for_id(0).as_ref() == layout.for_id(0).as_ref() {
            return Ok(());
        }
        Err(format!(
            "{addr} issues the {layout} layout from epoch {} but this client's other servers \
             (or its fallback) issue {pinned} from epoch {}: one client, one layout",
            vesta_core::Epoch::rfc3339(layout.epoch().unix_ms()),
            vesta_core::Epoch::rfc3339(pinned.epoch().unix_ms()),
        ))
    }
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
    /// Connects and shakes hands within `connect_timeout`; a server whose layout differs from
    /// the one `pin` holds is refused.
    pub(crate) async fn connect(
        addr: &str,
        connect_timeout: Duration,
        max_in_flight: usize,
        tls: Option<&ClientTls>,
        pin: &LayoutPin,
    ) -> Result<Conn, AttemptError> {
        let fut = async {
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|e| AttemptError::Connect(format!("{addr}: {e}")))?;
            let _ = tcp.set_nodelay(true);
            let mut stream = match tls {
                None => plain(tcp),
                Some(tls) => tls
                    .connect(host_of(addr), tcp)
                    .await
                    .map_err(|e| AttemptError::Connect(format!("{addr}: TLS: {e}")))?,
            };
            let hello = handshake(&mut stream)
                .await
                .map_err(|e| AttemptError::Connect(format!("{addr}: {e}")))?;
            pin.check(addr, &hello).map_err(AttemptError::Connect)?;
            Ok::<_, AttemptError>((stream, hello))
        };
        let (stream, hello) = timeout(connect_timeout, fut).await.map_err(|_| {
            AttemptError::Connect(format!(
                "{addr}: no handshake within {} ms",
                connect_timeout.as_millis()
            ))
        })??;
        let (r, w) = tokio::io::split(stream);
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
        let reader = tokio::spawn(read_loop(
            r,
            shared.clone(),
            hello.max_frame_bytes,
            hello.dialect.clone(),
        ));
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
    pub(crate) fn hello(&self) -> &Hello {
        &self.hello
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
        if let Request::Make(values) = request
            && self.hello.dialect.version < 2
            && !fits_v1(values)
        {
            return Ok(Response::Error {
                code: ErrorCode::InvalidArgument,
                message: "this server speaks protocol version 1, whose MAKE takes exactly \
                          version, type, genMethod, time, seq and machine"
                    .into(),
            });
        }
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
            request.encode(id, &self.hello.dialect, &mut st.wbuf);
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

/// The host of `host:port` (an IPv6 address without its brackets), which a TLS server's
/// certificate must name.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Sends `HELLO` and reads `HELLO_OK` (the only frame the server sends first).
async fn handshake(stream: &mut Stream) -> Result<Hello, String> {
    let mut out = BytesMut::new();
    Request::Hello {
        min_version: MIN_VERSION,
        max_version: VERSION,
    }
    .encode(1, &Dialect::v1(), &mut out);
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    let mut buf = BytesMut::with_capacity(256);
    loop {
        match frame::decode(&mut buf, MAX_MAX_FRAME_BYTES).map_err(|e| e.to_string())? {
            Some(f) => {
                return match Response::parse(&f, &Dialect::v1()).map_err(|e| e.to_string())? {
                    Response::HelloOk {
                        version,
                        max_frame_bytes,
                        max_batch,
                        layout,
                    } if (MIN_VERSION..=VERSION).contains(&version) => Ok(Hello {
                        max_frame_bytes,
                        max_batch,
                        dialect: match layout {
                            Some(layout) => Dialect::new(version, layout),
                            None => Dialect::v1(),
                        },
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

async fn write_loop(mut w: WriteHalf<Stream>, shared: Arc<Shared>) {
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

async fn read_loop(
    mut r: ReadHalf<Stream>,
    shared: Arc<Shared>,
    max_frame_bytes: u32,
    dialect: Dialect,
) {
    let mut buf = BytesMut::with_capacity(64 << 10);
    let reason = loop {
        match frame::decode(&mut buf, max_frame_bytes) {
            Ok(Some(f)) => {
                let answer = match Response::parse(&f, &dialect) {
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
