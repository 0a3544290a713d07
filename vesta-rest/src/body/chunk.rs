//! A piece of a response body ([`Chunk`]): what it accounts for (its request, the streamed
//! body's bytes alive) is given back when hyper drops it, sent or not.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::{Buf, Bytes};

use super::{Hold, Streaming};

/// A piece of a response body; gives back what it accounts for when hyper drops it.
#[derive(Debug)]
pub struct Chunk {
    pub(super) bytes: Bytes,
    /// Its length when made (bytes shrinks as hyper sends it).
    pub(super) len: usize,
    pub(super) held: Held,
}

#[derive(Debug)]
pub(super) enum Held {
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
