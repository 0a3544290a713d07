//! A server-side connection: a TCP stream (plain or TLS) with a read buffer that frames are cut from and a write
//! buffer that answers are appended to. Answers to a whole read's worth of pipelined requests go
//! out in one write, which is what makes pipelining cheap.

use std::io;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vesta_service::tls::Stream;

use crate::frame::{self, Frame, FrameError};

/// Bytes asked of each read: a few hundred pipelined requests.
const READ_CHUNK: usize = 16 << 10;
/// How long a closing connection keeps draining the peer's input.
const LINGER: std::time::Duration = std::time::Duration::from_millis(500);
/// The most input a closing connection drains.
const LINGER_MAX_BYTES: usize = 1 << 20;

/// A framed TCP connection.
#[derive(Debug)]
pub struct Connection {
    stream: Stream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    max_frame_bytes: u32,
}

impl Connection {
    /// Wraps an accepted stream; frames longer than `max_frame_bytes` are refused.
    pub fn new(stream: Stream, max_frame_bytes: u32) -> Self {
        Connection {
            stream,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            wbuf: BytesMut::with_capacity(READ_CHUNK),
            max_frame_bytes,
        }
    }

    /// The next complete frame already read, `None` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        frame::decode(&mut self.rbuf, self.max_frame_bytes)
    }

    /// Reads more bytes; `Ok(0)` means the peer closed its side. Cancel-safe: if the future is
    /// dropped before it completes, nothing was read.
    pub async fn fill(&mut self) -> io::Result<usize> {
        if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
            self.rbuf.reserve(READ_CHUNK);
        }
        self.stream.read_buf(&mut self.rbuf).await
    }

    /// True if part of a frame is buffered.
    pub fn has_partial_frame(&self) -> bool {
        !self.rbuf.is_empty()
    }

    /// The buffer answers are appended to.
    pub fn out(&mut self) -> &mut BytesMut {
        &mut self.wbuf
    }

    /// True if answers wait to be written.
    pub fn has_output(&self) -> bool {
        !self.wbuf.is_empty()
    }

    /// Writes everything appended so far.
    pub async fn flush(&mut self) -> io::Result<()> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        self.stream.write_all(&self.wbuf).await?;
        self.wbuf.clear();
        Ok(())
    }

    /// Flushes, closes the write side so the peer sees end-of-stream, then reads and discards
    /// for a short while ("lingering close"): closing a socket with unread input sends a reset,
    /// which could destroy the last frames (an error or `GOAWAY`) before the peer reads them.
    pub async fn close(&mut self) -> io::Result<()> {
        self.flush().await?;
        self.stream.shutdown().await?;
        let linger = async {
            let mut discarded = 0usize;
            while discarded < LINGER_MAX_BYTES {
                self.rbuf.clear();
                match self.stream.read_buf(&mut self.rbuf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => discarded += n,
                }
            }
        };
        let _ = tokio::time::timeout(LINGER, linger).await;
        Ok(())
    }
}
