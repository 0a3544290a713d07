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
    /// Most sections in memory (numeric: 800 KB each), string buckets included.
    pub max_sections: usize,
    /// Most string keys in memory, every bucket together.
    pub max_string_keys: usize,
    /// A section untouched this long is evicted (checked every quarter of it).
    pub idle: Duration,
}

impl Default for SeqOptions {
    fn default() -> Self {
        SeqOptions {
            step: 10_000,
            max_step: 1_000_000,
            store_timeout: Duration::from_secs(3),
            max_sections: 125,
            max_string_keys: 1_000_000,
            idle: Duration::from_secs(600),
        }
    }
}
