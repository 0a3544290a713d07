//! Shared test support: real servers on ephemeral loopback ports, and a raw client that speaks
//! the protocol byte by byte so tests can send what no well-behaved client would.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use vesta_server::TcpConfig;
use vesta_server::frame::{self, Frame};
use vesta_server::proto::{Dialect, MIN_VERSION, Request, Response, VERSION};
use vesta_server::{ServerHandle, TcpServer};

/// A server config on an ephemeral loopback port with static machine `machine`.
pub fn config(machine: u64) -> TcpConfig {
    let mut c = TcpConfig::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.machine.id = Some(machine);
    c
}

/// Starts a server from `config` on the current runtime.
pub async fn start(config: TcpConfig) -> ServerHandle {
    ServerHandle::spawn(TcpServer::start(config).await.unwrap())
}

/// Starts a server and also returns its issuer, to inspect or fence it.
pub async fn start_with_issuer(config: TcpConfig) -> (ServerHandle, Arc<vesta_embed::Issuer>) {
    let server = TcpServer::start(config).await.unwrap();
    let issuer = server.issuer().clone();
    (ServerHandle::spawn(server), issuer)
}

/// A connection that writes raw bytes and reads whole frames.
pub struct Raw {
    pub stream: TcpStream,
    buf: BytesMut,
    /// What frames are read and written in: version 1 until a handshake says otherwise.
    pub dialect: Dialect,
}

pub const WAIT: Duration = Duration::from_secs(5);

impl Raw {
    pub async fn connect(addr: std::net::SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        Raw {
            stream,
            buf: BytesMut::new(),
            dialect: Dialect::v1(),
        }
    }

    /// Connects with a tiny receive buffer, for a client that reads slowly or not at all.
    pub async fn connect_small_window(addr: std::net::SocketAddr) -> Raw {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let stream = socket.connect(addr).await.unwrap();
        Raw {
            stream,
            buf: BytesMut::new(),
            dialect: Dialect::v1(),
        }
    }

    /// Connects and completes the handshake in the newest version (from 2 the layout comes
    /// with `HELLO_OK`; 3 lists every machine ID in `INFO_OK`).
    pub async fn hello(addr: std::net::SocketAddr) -> Raw {
        Self::hello_with(addr, MIN_VERSION, VERSION).await
    }

    /// Connects and completes the handshake in version 2, as a client of before version 3.
    pub async fn hello_v2(addr: std::net::SocketAddr) -> Raw {
        Self::hello_with(addr, 1, 2).await
    }

    /// Connects and completes the handshake in version 1 (Vesta's layouts only).
    pub async fn hello_v1(addr: std::net::SocketAddr) -> Raw {
        Self::hello_with(addr, 1, 1).await
    }

    async fn hello_with(addr: std::net::SocketAddr, min_version: u8, max_version: u8) -> Raw {
        let mut r = Raw::connect(addr).await;
        r.send(
            1,
            &Request::Hello {
                min_version,
                max_version,
            },
        )
        .await;
        let (id, resp) = r.recv().await.expect("HELLO_OK");
        assert_eq!(id, 1);
        match resp {
            Response::HelloOk {
                version, layout, ..
            } if version == max_version => {
                if let Some(layout) = layout {
                    r.dialect = Dialect::new(version, layout);
                }
            }
            other => panic!("expected HELLO_OK version {max_version}: {other:?}"),
        }
        r
    }

    pub async fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    pub async fn send(&mut self, id: u32, r: &Request) {
        let mut b = BytesMut::new();
        r.encode(id, &self.dialect, &mut b);
        self.write(&b).await;
    }

    /// The next frame, or `None` at end of stream (or a reset). Panics after [`WAIT`].
    pub async fn recv_frame(&mut self) -> Option<Frame> {
        timeout(WAIT, async {
            loop {
                if let Some(f) = frame::decode(&mut self.buf, frame::MAX_MAX_FRAME_BYTES).unwrap() {
                    return Some(f);
                }
                match self.stream.read_buf(&mut self.buf).await {
                    Ok(0) | Err(_) => return None,
                    Ok(_) => {}
                }
            }
        })
        .await
        .expect("no frame within 5 s")
    }

    /// The next answer with its request id, or `None` at end of stream.
    pub async fn recv(&mut self) -> Option<(u32, Response)> {
        let f = self.recv_frame().await?;
        Some((f.request_id, Response::parse(&f, &self.dialect).unwrap()))
    }

    /// True if the server closed the connection (end of stream within [`WAIT`]).
    pub async fn closed(&mut self) -> bool {
        self.recv_frame().await.is_none()
    }
}

/// A raw frame with any op and payload.
pub fn raw_frame(op: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    frame::encode(
        &mut b,
        &Frame {
            op,
            request_id: id,
            payload: payload.to_vec().into(),
        },
    );
    b.to_vec()
}

/// `GET path` over HTTP/1.1 (the metrics listener's `/metrics`, `/healthz`, the console); the
/// status code and the body.
pub async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let (status, _, body) = get_with_auth(addr, path, None).await;
    (status, body)
}

/// `GET path` with an optional `Authorization` header; the status, the head and the body.
pub async fn get_with_auth(
    addr: std::net::SocketAddr,
    path: &str,
    auth: Option<&str>,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let status = out[9..12].parse().unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (status, head.to_owned(), body.to_owned())
}

/// The value of metric `name` (with its labels, as exposed) in an exposition.
pub fn sample(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
        .parse()
        .unwrap()
}
