//! `/genids` and `/segments/{tag}` as JSON written on demand ([`IdsJson`]) from evenly
//! spaced runs of numbers ([`Run`]), its exact length known before the first byte.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};
use vesta_core::{Form, IdRun};

/// Evenly spaced numbers: `first + k * stride` for `k < count` (a run of IDs, stride its
/// layout's step, or a range of segment numbers, stride 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Run {
    first: u64,
    count: u64,
    stride: u64,
}

impl Run {
    pub(super) fn of_ids(r: &IdRun) -> Run {
        Run {
            first: r.first,
            count: r.count,
            stride: r.step,
        }
    }

    pub(super) fn of_numbers(r: &Range<u64>) -> Run {
        Run {
            first: r.start,
            count: r.end.saturating_sub(r.start),
            stride: 1,
        }
    }

    pub(super) fn get(&self, k: u64) -> Option<u64> {
        (k < self.count).then(|| self.first + k * self.stride)
    }
}

/// `{"ids":["…",…]}` written on demand from the runs (IDs are strings: JavaScript numbers lose
/// precision above 2^53), with its exact length known up front (for `Content-Length`).
#[derive(Debug)]
pub(super) struct IdsJson {
    runs: Vec<Run>,
    /// How each ID is written.
    form: Form,
    /// Position of the next ID: run index and index within it.
    run: usize,
    k: u64,
    /// `{"ids":[` is written.
    opened: bool,
    /// At least one ID is written (the next one needs a comma).
    any: bool,
    done: bool,
    /// Exact bytes still to write.
    remaining: usize,
}

impl IdsJson {
    pub(super) const OPEN: &'static [u8] = b"{\"ids\":[";
    const CLOSE: &'static [u8] = b"]}";
    pub(super) const FRAME_BYTES: usize = Self::OPEN.len() + Self::CLOSE.len();

    pub(super) fn new(runs: Vec<Run>, form: Form) -> Self {
        let ids: u64 = runs.iter().map(|r| r.count).sum();
        let digits: u64 = match form {
            Form::Decimal => runs.iter().map(digits_in_run).sum(),
            // The other forms have a fixed width.
            _ => ids * form.encode(0).as_str().len() as u64,
        };
        let commas = ids.saturating_sub(1);
        let len = Self::FRAME_BYTES as u64 + digits + 2 * ids + commas;
        IdsJson {
            runs,
            form,
            run: 0,
            k: 0,
            opened: false,
            any: false,
            done: false,
            remaining: usize::try_from(len).unwrap_or(usize::MAX),
        }
    }

    pub(super) fn is_done(&self) -> bool {
        self.done
    }

    pub(super) fn remaining(&self) -> usize {
        self.remaining
    }

    /// The next ID, without moving past it.
    pub(super) fn peek(&mut self) -> Option<u64> {
        while let Some(r) = self.runs.get(self.run) {
            if let Some(id) = r.get(self.k) {
                return Some(id);
            }
            self.run += 1;
            self.k = 0;
        }
        None
    }

    /// Up to `max` more bytes (at least one ID's worth while any are left).
    pub(super) fn write_chunk(&mut self, max: usize) -> Bytes {
        let mut out = BytesMut::with_capacity(self.remaining.min(max));
        if !self.opened {
            out.put_slice(Self::OPEN);
            self.opened = true;
        }
        let mut text = itoa::Buffer::new();
        while let Some(id) = self.peek() {
            let formed;
            let digits = match self.form {
                Form::Decimal => text.format(id).as_bytes(),
                form => {
                    formed = form.encode(id);
                    formed.as_str().as_bytes()
                }
            };
            let comma = usize::from(self.any);
            if !out.is_empty() && out.len() + comma + digits.len() + 2 > max {
                break;
            }
            if self.any {
                out.put_u8(b',');
            }
            self.any = true;
            out.put_u8(b'"');
            out.put_slice(digits);
            out.put_u8(b'"');
            self.k += 1;
        }
        if self.peek().is_none() && (out.is_empty() || out.len() + Self::CLOSE.len() <= max) {
            out.put_slice(Self::CLOSE);
            self.done = true;
        }
        self.remaining -= out.len();
        debug_assert!(!self.done || self.remaining == 0, "length was miscounted");
        out.freeze()
    }
}

/// Decimal digits of all IDs of `run`, counted per power of ten rather than per ID.
pub(super) fn digits_in_run(run: &Run) -> u64 {
    let mut total = 0;
    let mut k = 0;
    while k < run.count {
        let id = run.first + k * run.stride;
        let digits = u64::from(id.checked_ilog10().unwrap_or(0) + 1);
        // The first index whose ID has more digits.
        let next = match 10u64.checked_pow(digits as u32) {
            Some(bound) => (bound - run.first).div_ceil(run.stride).min(run.count),
            None => run.count,
        };
        total += (next - k) * digits;
        k = next;
    }
    total
}
