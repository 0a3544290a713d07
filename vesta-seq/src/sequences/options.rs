//! [`SeqOptions`]: how the sequences behave (step, memory bounds, timeouts), in the library's
//! units; the `[seq]` section (`config.rs`) reads them in config units and checks them.

use std::time::Duration;

/// How the sequences behave; [`SeqOptions::default`] is what a server uses unless told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqOptions {
    /// How far a raise moves a section's maximum at first (seqsvr: 10,000), and the largest
    /// batch. A section raised again within a second doubles its step, up to `max_step`; one
    /// raised a minute or more after halves it, down to `step` (Leaf's adaptive step, per
    /// section). A larger step writes less and loses more numbers at a restart.
    pub step: u64,
    /// The adaptive step's ceiling (at least `step`).
    pub max_step: u64,
    /// Longest wait for one round trip to the table (and a caller's longest wait for a raise).
    pub store_timeout: Duration,
    /// Most bytes the sections in memory hold together (`seq.max_memory_mb`): a numeric
    /// section 16-40 bytes a key called until it is a flat array of 800 KB (8 bytes a key), a
    /// spread numeric key 16-40 bytes, a string key 24-56 bytes and its text. At the bound the
    /// least recently used sections are evicted to make room.
    pub max_memory: usize,
    /// A section untouched this long is evicted (checked every quarter of it).
    pub idle: Duration,
}

impl Default for SeqOptions {
    fn default() -> Self {
        SeqOptions {
            step: 10_000,
            max_step: 1_000_000,
            store_timeout: Duration::from_secs(3),
            max_memory: 256 << 20,
            idle: Duration::from_secs(600),
        }
    }
}
