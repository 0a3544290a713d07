//! The frame layer of the protocol (docs/protocol.md): `length:u32 op:u8 request_id:u32 payload`,
//! big-endian. Pure functions over byte buffers, shared by the server, the client, the load tool
//! and the fuzz target; no I/O, and no input can make them panic.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes of the length field.
pub const LENGTH_BYTES: usize = 4;
/// Bytes after the length field that every frame has: op and request id.
pub const HEADER_BYTES: usize = 5;
/// The smallest `max_frame_bytes` a server accepts in its config: room for the longest `INFO`
/// or error answer (messages are cut to 1024 bytes), so no answer can exceed the limit.
pub const MIN_MAX_FRAME_BYTES: u32 = 2048;
/// The largest `max_frame_bytes` a server accepts in its config (16 MiB).
pub const MAX_MAX_FRAME_BYTES: u32 = 16 << 20;
/// The default `max_frame_bytes`.
pub const DEFAULT_MAX_FRAME_BYTES: u32 = 64 << 10;

/// One frame: an op, the request id it belongs to and the op's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// What the frame is (requests `0x01..=0x7f`, answers `0x80..=0xff`).
    pub op: u8,
    /// Chosen by the client; answers carry the same id. 0: server-originated.
    pub request_id: u32,
    /// The op's payload.
    pub payload: Bytes,
}

/// A byte stream that is not a sequence of valid frames. After one of these the stream cannot be
/// resynchronised, so the reader closes the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length field is below the 5 bytes of op and request id.
    #[error("frame length {length} is too short: allowed {min}..={max}", min = HEADER_BYTES)]
    TooShort {
        /// The length field.
        length: u32,
        /// The largest allowed length.
        max: u32,
    },
    /// The length field is above the limit.
    #[error("frame length {length} is too large: allowed {min}..={max}", min = HEADER_BYTES)]
    TooLarge {
        /// The length field.
        length: u32,
        /// The largest allowed length.
        max: u32,
    },
}

/// Reads one complete frame from the front of `buf`, or `Ok(None)` if `buf` holds only part of
/// one (nothing is consumed then). A length field out of `5..=max_frame_bytes` is an error before
/// any of the body is needed, so an oversize frame is never buffered.
pub fn decode(buf: &mut BytesMut, max_frame_bytes: u32) -> Result<Option<Frame>, FrameError> {
    let Some(length) = peek_length(buf, max_frame_bytes)? else {
        return Ok(None);
    };
    let total = LENGTH_BYTES + length as usize;
    if buf.len() < total {
        // Make room for the rest in one allocation instead of several.
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    buf.advance(LENGTH_BYTES);
    let op = buf.get_u8();
    let request_id = buf.get_u32();
    let payload = buf.split_to(length as usize - HEADER_BYTES).freeze();
    Ok(Some(Frame {
        op,
        request_id,
        payload,
    }))
}

/// The length field at the front of `buf`, checked against the limit; `None` if fewer than four
/// bytes are there.
pub fn peek_length(buf: &[u8], max_frame_bytes: u32) -> Result<Option<u32>, FrameError> {
    let Some(head) = buf.get(..LENGTH_BYTES) else {
        return Ok(None);
    };
    let length = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    if (length as usize) < HEADER_BYTES {
        return Err(FrameError::TooShort {
            length,
            max: max_frame_bytes,
        });
    }
    if length > max_frame_bytes {
        return Err(FrameError::TooLarge {
            length,
            max: max_frame_bytes,
        });
    }
    Ok(Some(length))
}

/// Appends a frame header for a payload of `payload_len` bytes; the caller appends the payload.
#[inline]
pub fn put_header(out: &mut BytesMut, op: u8, request_id: u32, payload_len: usize) {
    out.reserve(LENGTH_BYTES + HEADER_BYTES + payload_len);
    out.put_u32((HEADER_BYTES + payload_len) as u32);
    out.put_u8(op);
    out.put_u32(request_id);
}

/// Appends a whole frame.
pub fn encode(out: &mut BytesMut, frame: &Frame) {
    put_header(out, frame.op, frame.request_id, frame.payload.len());
    out.put_slice(&frame.payload);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame_strategy() -> impl Strategy<Value = Frame> {
        (
            any::<u8>(),
            any::<u32>(),
            proptest::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(|(op, request_id, payload)| Frame {
                op,
                request_id,
                payload: payload.into(),
            })
    }

    proptest! {
        /// Any sequence of frames, encoded back to back and fed in arbitrary chunks, decodes to
        /// the same frames and leaves nothing behind.
        #[test]
        fn frames_round_trip_in_any_chunking(
            frames in proptest::collection::vec(frame_strategy(), 0..20),
            cuts in proptest::collection::vec(1usize..64, 0..50),
        ) {
            let mut wire = BytesMut::new();
            for f in &frames {
                encode(&mut wire, f);
            }
            let wire = wire.freeze();
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            let mut pos = 0;
            let mut cuts = cuts.into_iter().cycle();
            while pos < wire.len() {
                let n = cuts.next().unwrap_or(wire.len()).min(wire.len() - pos);
                buf.extend_from_slice(&wire[pos..pos + n]);
                pos += n;
                while let Some(f) = decode(&mut buf, 1024).unwrap() {
                    got.push(f);
                }
            }
            prop_assert_eq!(got, frames);
            prop_assert!(buf.is_empty());
        }

        /// Arbitrary bytes never panic the decoder; every frame it returns re-encodes to exactly
        /// the bytes it consumed, and an error happens only for a bad length field.
        #[test]
        fn arbitrary_bytes_decode_or_fail_cleanly(
            bytes in proptest::collection::vec(any::<u8>(), 0..600),
            max in 5u32..512,
        ) {
            let mut buf = BytesMut::from(&bytes[..]);
            loop {
                let before = buf.clone();
                match decode(&mut buf, max) {
                    Ok(Some(f)) => {
                        let mut re = BytesMut::new();
                        encode(&mut re, &f);
                        prop_assert_eq!(&before[..re.len()], &re[..]);
                        prop_assert_eq!(before.len() - re.len(), buf.len());
                    }
                    Ok(None) => {
                        prop_assert_eq!(&before[..], &buf[..]);
                        if before.len() >= 4 {
                            let len = u32::from_be_bytes([before[0], before[1], before[2], before[3]]);
                            prop_assert!(before.len() < 4 + len as usize);
                        }
                        break;
                    }
                    Err(e) => {
                        let len = u32::from_be_bytes([before[0], before[1], before[2], before[3]]);
                        prop_assert!(len < 5 || len > max, "{e}");
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn oversize_length_is_refused_before_the_body_arrives() {
        let mut buf = BytesMut::from(&[0x00, 0x10, 0x00, 0x00][..]);
        assert_eq!(
            decode(&mut buf, 65536),
            Err(FrameError::TooLarge {
                length: 0x0010_0000,
                max: 65536
            })
        );
        let mut buf = BytesMut::from(&[0, 0, 0, 4, 1, 0, 0, 0][..]);
        let err = decode(&mut buf, 65536).unwrap_err();
        assert_eq!(
            err.to_string(),
            "frame length 4 is too short: allowed 5..=65536"
        );
    }
}
