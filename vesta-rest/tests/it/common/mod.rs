//! Shared by the integration tests: a real server on an ephemeral loopback port and a real
//! hyper client (hyper-util's legacy client over HTTP/1.1 keep-alive, or HTTP/2).

#![allow(dead_code)] // each test binary uses its own subset

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header::HeaderMap;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use vesta_core::{Clock, IdType, ManualClock};
use vesta_embed::{Issuer, IssuerConfig};
use vesta_rest::{RestConfig, RestSection, RestServer, ServeReport};
use vesta_segment::{SegmentSection, Store};
use vesta_service::Segments;

/// 2023-11-14T22:13:20Z, a round second well inside both layouts' lifetimes.
pub const T0: u64 = 1_700_000_000_000;

/// The default `[rest]` section on an ephemeral loopback port.
pub fn rest() -> RestSection {
    RestSection {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..RestSection::default()
    }
}

/// The default REST issuer config (genMethod rest, machine 924).
pub fn issuer_config() -> IssuerConfig {
    RestConfig::default().issuer_config()
}

/// An issuer on the system clock with the defaults.
pub fn system_issuer() -> Issuer {
    Issuer::start(issuer_config()).unwrap()
}

/// An issuer on the system clock in Leaf's layout (machine 924, the server pool's first).
pub fn leaf_issuer() -> Issuer {
    let mut config = issuer_config();
    config.id.layout = vesta_embed::config::LayoutChoice::Preset(vesta_core::Preset::Leaf);
    Issuer::start(config).unwrap()
}

/// An issuer on a manual clock reading `T0`, of the given type.
pub fn manual_issuer(id_type: IdType) -> (Issuer<Arc<ManualClock>>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    let mut config = issuer_config();
    config.id.id_type = Some(id_type);
    let issuer = Issuer::start_with_clock(config, Arc::clone(&clock)).unwrap();
    // Waits for the next unit last until the test moves the clock.
    clock.hold_waits(true);
    (issuer, clock)
}

/// The value of a labelled sample (`name{labels} value`) in a metrics text.
pub fn labelled_sample(metrics: &str, name_and_labels: &str) -> f64 {
    let prefix = format!("{name_and_labels} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no sample {name_and_labels} in:\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}

/// A server running on its own task until [`TestServer::stop`].
pub struct TestServer<C: Clock + 'static> {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its issuer (to fence it, or to watch it being released).
    pub issuer: Arc<Issuer<C>>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<ServeReport>,
}

/// An SQLite segment database in `dir` with `leaf_alloc` and the given `(tag, step)` rows
/// (each starting at 1), and a `[segment]` section for it (short waits, so tests stay quick).
pub async fn segment_db(dir: &std::path::Path, tags: &[(&str, i64)]) -> SegmentSection {
    let url = format!("sqlite://{}/segments.db", dir.display());
    let parsed = vesta_segment::DbUrl::parse(&url).unwrap();
    let db = vesta_segment::Database::connect_or_create(&parsed, Duration::from_secs(5))
        .await
        .unwrap();
    db.init().await.unwrap();
    for (tag, step) in tags {
        db.create_tag(tag, *step, 1, None).await.unwrap();
    }
    db.close().await;
    SegmentSection {
        db: Some(url),
        wait_ms: 300,
        fetch_timeout_ms: 500,
        ..SegmentSection::default()
    }
}

/// Opens the segment store of `section`.
pub async fn open_segments(section: &SegmentSection) -> Arc<Segments> {
    Segments::from_store(Store::open(section).await.unwrap())
}

/// Binds and starts serving `issuer` under `rest`.
pub async fn spawn<C: Clock + 'static>(issuer: Issuer<C>, rest: RestSection) -> TestServer<C> {
    spawn_with_segments(issuer, rest, None).await
}

/// Binds and starts serving `issuer` and `segments` under `rest`.
pub async fn spawn_with_segments<C: Clock + 'static>(
    issuer: Issuer<C>,
    rest: RestSection,
    segments: Option<Arc<Segments>>,
) -> TestServer<C> {
    spawn_with_stores(issuer, rest, segments, None).await
}

/// Per-key sequences on a fresh SQLite file in `dir` (default options), its standalone owner.
pub async fn seq_db(dir: &std::path::Path) -> vesta_seq::Sequences {
    seq_db_as(dir, vesta_seq::Owner::standalone()).await
}

/// [`seq_db`] as `owner` says (a cluster member's, to join), the restore guard's floors in
/// `dir` too.
pub async fn seq_db_as(dir: &std::path::Path, owner: vesta_seq::Owner) -> vesta_seq::Sequences {
    let url = vesta_segment::DbUrl::parse(&format!("sqlite://{}/seq.db", dir.display())).unwrap();
    let owner = owner.floors_in(dir.join("floors"));
    vesta_seq::Sequences::open_as(&url, vesta_seq::SeqOptions::default(), owner)
        .await
        .unwrap()
}

/// Binds and starts serving `issuer`, `segments` and the sequences `seq` under `rest`.
pub async fn spawn_with_stores<C: Clock + 'static>(
    issuer: Issuer<C>,
    rest: RestSection,
    segments: Option<Arc<Segments>>,
    seq: Option<vesta_seq::Sequences>,
) -> TestServer<C> {
    let server = RestServer::with_issuer_and_stores(Arc::new(issuer), rest, segments, seq)
        .await
        .unwrap();
    let addr = server.local_addr();
    let issuer = Arc::clone(server.issuer());
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = rx.await;
    }));
    TestServer {
        addr,
        issuer,
        stop: Some(tx),
        task,
    }
}

impl<C: Clock + 'static> TestServer<C> {
    /// A client for this server over HTTP/1.1.
    pub fn client(&self) -> Client {
        Client::new(self.addr, false)
    }

    /// Signals shutdown without waiting for it.
    pub fn signal_stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }

    /// Signals shutdown and waits for `serve` to return.
    pub async fn stop(mut self) -> ServeReport {
        self.signal_stop();
        self.task.await.unwrap()
    }

    /// Waits for `serve` to return (after [`signal_stop`](Self::signal_stop)).
    pub async fn join(self) -> ServeReport {
        self.task.await.unwrap()
    }
}

/// A response, fully read.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: HeaderMap,
    /// Body as text.
    pub body: String,
}

impl Reply {
    /// A header's value as text ("" when absent).
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The body parsed as JSON, checking the content type says JSON.
    pub fn json(&self) -> serde_json::Value {
        assert_eq!(self.header("content-type"), "application/json", "{self:?}");
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The sentence of a JSON error body, checking it is the only key.
    pub fn error(&self) -> String {
        let v = self.json();
        let obj = v
            .as_object()
            .unwrap_or_else(|| panic!("not an object: {v}"));
        assert_eq!(obj.len(), 1, "error body has other keys: {v}");
        obj["error"].as_str().unwrap().to_owned()
    }

    /// The body as a decimal ID.
    pub fn id(&self) -> u64 {
        assert_eq!(self.status, 200, "{self:?}");
        assert_eq!(self.header("content-type"), "text/plain; charset=utf-8");
        self.body
            .parse()
            .unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// A hyper client bound to one server.
#[derive(Clone)]
pub struct Client {
    inner: HyperClient<HttpConnector, Empty<Bytes>>,
    base: String,
}

impl Client {
    /// A client for `addr`; `http2` for prior-knowledge HTTP/2 (h2c).
    pub fn new(addr: SocketAddr, http2: bool) -> Self {
        let inner = HyperClient::builder(TokioExecutor::new())
            .http2_only(http2)
            .build_http();
        Client {
            inner,
            base: format!("http://{addr}"),
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Reply {
        self.request(Method::GET, path).await
    }

    /// `method path`.
    pub async fn request(&self, method: Method, path: &str) -> Reply {
        self.try_request(method, path)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// `method path`, with transport errors returned.
    pub async fn try_request(&self, method: Method, path: &str) -> Result<Reply, String> {
        let req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .body(Empty::new())
            .map_err(|e| e.to_string())?;
        let resp = self
            .inner
            .request(req)
            .await
            .map_err(|e| format!("{e:?}"))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(Reply {
            status,
            headers,
            body: String::from_utf8(body.to_vec()).map_err(|e| e.to_string())?,
        })
    }
}

/// The value of an unlabelled sample (`name value`) in a metrics text.
pub fn sample(metrics: &str, name: &str) -> f64 {
    let prefix = format!("{name} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no sample {name} in:\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}

/// An HTTP/2 connection made with the `h2` crate directly, for clients no well-behaved library
/// would be: ones that grant no flow-control window, or only PING.
pub struct H2Conn {
    /// Opens streams.
    pub send: h2::client::SendRequest<Bytes>,
    /// Drives the connection (and answers the server's PINGs); ends when it closes.
    pub driver: JoinHandle<Result<(), h2::Error>>,
    /// Sends our own PINGs.
    pub ping: h2::PingPong,
    addr: SocketAddr,
}

impl H2Conn {
    /// Connects with prior knowledge; `window` sets `SETTINGS_INITIAL_WINDOW_SIZE` (0: the
    /// server may send no response body at all).
    pub async fn connect(addr: SocketAddr, window: Option<u32>) -> H2Conn {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut b = h2::client::Builder::new();
        if let Some(w) = window {
            b.initial_window_size(w);
        }
        let (send, mut conn) = b.handshake::<_, Bytes>(tcp).await.unwrap();
        let ping = conn.ping_pong().expect("ping_pong is taken once");
        H2Conn {
            send,
            driver: tokio::spawn(conn),
            ping,
            addr,
        }
    }

    /// Opens a `GET path` stream; `None` once the server refuses new streams.
    pub async fn open(&self, path: &str) -> Option<h2::client::ResponseFuture> {
        let req = Request::get(format!("http://{}{path}", self.addr))
            .body(())
            .unwrap();
        let mut send = self.send.clone().ready().await.ok()?;
        send.send_request(req, true).ok().map(|(resp, _)| resp)
    }

    /// Starts a gRPC call by hand (no client library, so no client-side timer races the
    /// server's and no window is granted but the connection's): `POST path` with one message
    /// `body` (`prost`-encoded, framed here) and `headers` such as `grpc-timeout`; `None` once
    /// the connection can open no more streams.
    pub async fn grpc_start(
        &self,
        path: &str,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> Option<h2::client::ResponseFuture> {
        let mut req = Request::post(format!("http://{}{path}", self.addr))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let mut framed = vec![0];
        framed.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        framed.extend_from_slice(body);
        let mut send = self.send.clone().ready().await.ok()?;
        let (resp, mut stream) = send.send_request(req.body(()).unwrap(), false).ok()?;
        stream.send_data(Bytes::from(framed), true).ok()?;
        Some(resp)
    }

    /// A whole gRPC call by hand ([`H2Conn::grpc_start`]); returns the messages' bytes
    /// received and the `grpc-status` (from the headers of a trailers-only answer, else from
    /// the trailers).
    pub async fn grpc_call(
        &self,
        path: &str,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> (usize, String) {
        let resp = self
            .grpc_start(path, body, headers)
            .await
            .expect("a stream opens");
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
        if let Some(code) = resp.headers().get("grpc-status") {
            return (0, code.to_str().unwrap().to_owned());
        }
        let mut body = resp.into_body();
        let mut bytes = 0;
        while let Some(data) = body.data().await {
            let data = data.unwrap();
            bytes += data.len();
            let _ = body.flow_control().release_capacity(data.len());
        }
        let trailers = body.trailers().await.unwrap().expect("trailers");
        (bytes, trailers["grpc-status"].to_str().unwrap().to_owned())
    }

    /// A gRPC call whose body is `raw` as given (no framing added: a message cut short, no
    /// message, bytes that are no message); returns the `grpc-status` and `grpc-message`
    /// (percent-decoded) of its trailers-only answer, or of its trailers.
    pub async fn grpc_raw(&self, path: &str, raw: &[u8]) -> (String, String) {
        let req = Request::post(format!("http://{}{path}", self.addr))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        let mut send = self.send.clone().ready().await.expect("a stream opens");
        let (resp, mut stream) = send.send_request(req.body(()).unwrap(), false).unwrap();
        stream.send_data(Bytes::copy_from_slice(raw), true).unwrap();
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
        let status = |h: &HeaderMap| {
            let text = |name: &str| h.get(name).map_or("", |v| v.to_str().unwrap()).to_owned();
            let message = percent_encoding::percent_decode_str(&text("grpc-message"))
                .decode_utf8_lossy()
                .into_owned();
            (text("grpc-status"), message)
        };
        if resp.headers().contains_key("grpc-status") {
            return status(resp.headers());
        }
        let mut body = resp.into_body();
        while let Some(data) = body.data().await {
            let _ = body.flow_control().release_capacity(data.unwrap().len());
        }
        status(&body.trailers().await.unwrap().expect("trailers"))
    }

    /// PINGs every `every` until the server closes the connection (at most `limit`); returns
    /// the PONGs received and how the connection ended.
    pub async fn ping_until_closed(
        mut self,
        every: Duration,
        limit: Duration,
    ) -> (u32, Result<(), String>) {
        let mut pongs = 0;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            tokio::select! {
                ended = &mut self.driver => {
                    return (pongs, ended.unwrap().map_err(|e| e.to_string()));
                }
                () = tokio::time::sleep_until(deadline) => {
                    return (pongs, Err("still open".into()));
                }
                () = tokio::time::sleep(every) => {
                    let pinged = tokio::time::timeout(every, self.ping.ping(h2::Ping::opaque())).await;
                    if matches!(pinged, Ok(Ok(_))) {
                        pongs += 1;
                    }
                }
            }
        }
    }
}

/// The resident memory of process `pid`, from `/proc/<pid>/status`.
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kb * 1024
}
