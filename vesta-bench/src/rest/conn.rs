//! One HTTP/1.1 keep-alive connection on hyper's client connection API, driven by a
//! current-thread tokio runtime of its own. The connection's thread blocks on one request at a
//! time and sleeps between requests with the thread's precise timer, never an async one.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HOST, HeaderValue};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio::time::timeout;

/// Longest wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for one whole answer (the REST server itself waits at most 3 s for IDs).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// A connected HTTP/1.1 connection.
pub(crate) struct HttpConn {
    runtime: Runtime,
    sender: SendRequest<Empty<Bytes>>,
    host: HeaderValue,
}

impl HttpConn {
    /// Connects to `target` (`host:port`).
    pub(crate) fn connect(target: &str) -> Result<HttpConn, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        let host = HeaderValue::from_str(target).map_err(|e| format!("bad host: {e}"))?;
        let sender = runtime.block_on(async {
            let connecting = async {
                let stream = TcpStream::connect(target)
                    .await
                    .map_err(|e| format!("connect: {e}"))?;
                stream
                    .set_nodelay(true)
                    .map_err(|e| format!("connect: {e}"))?;
                let (sender, conn) = http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|e| format!("HTTP handshake: {e}"))?;
                // Polled whenever the thread blocks on a request; ends with the connection.
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok::<_, String>(sender)
            };
            timeout(CONNECT_TIMEOUT, connecting)
                .await
                .map_err(|_| format!("no connection within {CONNECT_TIMEOUT:?}"))?
        })?;
        Ok(HttpConn {
            runtime,
            sender,
            host,
        })
    }

    /// `GET path`: the status and the whole body.
    pub(crate) fn get(&mut self, path: &str) -> Result<(StatusCode, Bytes), String> {
        let request = Request::get(path)
            .header(HOST, self.host.clone())
            .body(Empty::new())
            .map_err(|e| format!("GET {path}: {e}"))?;
        let sender = &mut self.sender;
        self.runtime.block_on(async {
            let exchange = async {
                sender
                    .ready()
                    .await
                    .map_err(|e| format!("connection: {e}"))?;
                let answer = sender
                    .send_request(request)
                    .await
                    .map_err(|e| format!("GET {path}: {e}"))?;
                let status = answer.status();
                let body = answer
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| format!("GET {path}: reading the body: {e}"))?
                    .to_bytes();
                Ok((status, body))
            };
            timeout(ANSWER_TIMEOUT, exchange)
                .await
                .map_err(|_| format!("GET {path}: no answer within {ANSWER_TIMEOUT:?}"))?
        })
    }
}
