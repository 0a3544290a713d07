//! One blocking TCP connection speaking the server's own codec: requests are
//! `vesta_server::proto::Request::encode`d, answers cut by `vesta_server::frame::decode` and
//! read by `Response::parse`. Nothing here knows a byte of the wire format itself.
//!
//! Not the library's failover `Client`: it retries, fails over and backs off, which would hide
//! errors and add its own waits to the latency being measured; a load tool needs each request
//! sent once, on a known connection, at a known time.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use vesta_server::frame::{self, MAX_MAX_FRAME_BYTES};
use vesta_server::proto::{Dialect, MIN_VERSION, Request, Response, VERSION};

/// Longest wait for a connection, a handshake or a one-off answer.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a read waits before the caller gets to check its clock and flags.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// The read half: bytes in, answers out.
pub(crate) struct Reader {
    stream: TcpStream,
    buf: BytesMut,
    /// Reads land here and only what arrived is copied on, so no read zero-fills spare capacity.
    scratch: Box<[u8]>,
    /// The version and the server's layout, once the handshake told them.
    pub dialect: Dialect,
}

impl Reader {
    /// Reads what has arrived (waiting up to 50 ms); `Ok(false)` when nothing came in time.
    pub(crate) fn fill(&mut self) -> Result<bool, String> {
        fill(&mut self.stream, &mut self.scratch, &mut self.buf)
    }

    /// The socket, for `poll(2)`.
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.stream.as_fd()
    }

    /// The next whole answer already read, with its request id.
    pub(crate) fn next(&mut self) -> Result<Option<(u32, Response)>, String> {
        let Some(f) =
            frame::decode(&mut self.buf, MAX_MAX_FRAME_BYTES).map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let answer = Response::parse(&f, &self.dialect).map_err(|e| e.to_string())?;
        Ok(Some((f.request_id, answer)))
    }

    /// Waits up to [`CONNECT_TIMEOUT`] for the next answer.
    fn answer(&mut self) -> Result<(u32, Response), String> {
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        loop {
            if let Some(a) = self.next()? {
                return Ok(a);
            }
            if Instant::now() > deadline {
                return Err(format!("no answer within {CONNECT_TIMEOUT:?}"));
            }
            self.fill()?;
        }
    }
}

/// A connection after the handshake: the write half and the [`Reader`].
pub(crate) struct Conn {
    /// The write half (the same socket).
    pub writer: TcpStream,
    /// The read half.
    pub reader: Reader,
}

impl Conn {
    /// Connects to `target` and completes the version handshake.
    pub(crate) fn connect(target: &str) -> Result<Conn, String> {
        let (stream, reader) = connect_halves(target)?;
        let mut conn = Conn {
            writer: stream,
            reader: Reader {
                stream: reader,
                buf: BytesMut::with_capacity(256 << 10),
                scratch: vec![0; 64 << 10].into_boxed_slice(),
                dialect: Dialect::v1(),
            },
        };
        let hello = Request::Hello {
            min_version: MIN_VERSION,
            max_version: VERSION,
        };
        match conn.call(&hello)? {
            Response::HelloOk {
                version, layout, ..
            } => {
                if let Some(layout) = layout {
                    conn.reader.dialect = Dialect::new(version, layout);
                }
                Ok(conn)
            }
            other => Err(format!("handshake refused: {other:?}")),
        }
    }

    /// Sends one request and waits for its answer; nothing else may be in flight.
    pub(crate) fn call(&mut self, request: &Request) -> Result<Response, String> {
        let mut out = BytesMut::new();
        request.encode(1, &self.reader.dialect, &mut out);
        self.write(&out)?;
        match self.reader.answer()? {
            (1, answer) => Ok(answer),
            (_, Response::GoAway { message, .. }) => {
                Err(format!("the server said GOAWAY: {message}"))
            }
            (id, answer) => Err(format!("answer to request {id}, expected 1: {answer:?}")),
        }
    }

    /// Writes encoded requests.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.writer
            .write_all(bytes)
            .map_err(|e| format!("write: {e}"))
    }
}

pub(crate) fn connect_stream(target: &str) -> Result<TcpStream, String> {
    let addrs = target
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve: {e}"))?;
    let mut last = "no address".to_owned();
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("connect: {e}"),
        }
    }
    Err(last)
}

/// A connection to `target` without Nagle's delay, as its write half and a read half whose
/// reads wait at most [`POLL`].
pub(crate) fn connect_halves(target: &str) -> Result<(TcpStream, TcpStream), String> {
    let stream = connect_stream(target)?;
    let setup = |s: &TcpStream| {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(POLL))?;
        s.try_clone()
    };
    let reader = setup(&stream).map_err(|e| e.to_string())?;
    Ok((stream, reader))
}

/// Reads what has arrived on `stream` (a socket with a read timeout) through `scratch` onto
/// `buf`; `Ok(false)` when nothing came before the timeout. Every load's connections read so.
pub(crate) fn fill(
    stream: &mut impl Read,
    scratch: &mut [u8],
    buf: &mut BytesMut,
) -> Result<bool, String> {
    match stream.read(scratch) {
        Ok(0) => Err("closed by the server".into()),
        Ok(n) => {
            buf.extend_from_slice(&scratch[..n]);
            Ok(true)
        }
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(format!("read: {e}")),
    }
}
