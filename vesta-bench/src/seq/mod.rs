//! The per-key sequence load (`--seq-keys N`, issue 33) and its peers.
//!
//! Each request asks for the next number (or the next `count`) of one key, drawn uniformly at
//! random from `0..N` and sent as decimal text, as a client of WeChat seqsvr's model would: the
//! TCP engine sends `SEQ_NEXT` ([`crate::tcp`]), the REST engine `GET /seq/{key}`
//! ([`crate::rest`]). Every answer is checked to be the asked count of numbers (a `SEQ` of that
//! count over TCP; a number, or `first`..`last` of that length, over REST); an error answer is
//! counted by its code, as for IDs. The numbers counted are `count` per answer.
//!
//! The peers get the same keys (the same generator, seeded the same way per connection), the
//! same connections and the same counts, in the same run shape ([`Peer`](crate::Peer)):
//!
//! - `redis`: `INCR key` (`INCRBY key count`), pipelined like the TCP load, over a minimal
//!   RESP client of our own (closed loop).
//! - `postgres`: `UPDATE seq SET cur = cur + $2 WHERE key = $1 RETURNING cur` through sqlx,
//!   one query in flight per connection (a pool of as many connections as the run has), rows
//!   pre-created; closed loop or a fixed rate.

pub(crate) mod postgres;
pub(crate) mod redis;

/// The keys of one connection: splitmix64 (Steele, Lea and Flood; the seeding generator of
/// the xoshiro family), seeded by the connection's index, mapped onto `0..n` by a multiply
/// and a shift (Lemire). The bias of the mapping is below `n / 2^64`: none that a run could
/// see. The same connection index draws the same keys in every run, so vesta and its peers are
/// asked for the same keys in the same order.
#[derive(Clone)]
pub(crate) struct Keys {
    state: u64,
    n: u64,
    text: itoa::Buffer,
}

impl Keys {
    /// Keys in `0..n` (n ≥ 1) for connection `conn`.
    pub(crate) fn new(n: u64, conn: usize) -> Self {
        Keys {
            // Distinct, well-spread seeds per connection; never the same stream twice.
            state: (conn as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED_5EED,
            n: n.max(1),
            text: itoa::Buffer::new(),
        }
    }

    /// The next key.
    pub(crate) fn next_key(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((u128::from(z) * u128::from(self.n)) >> 64) as u64
    }

    /// The next key as decimal text, and as a number.
    pub(crate) fn next_text(&mut self) -> (&str, u64) {
        let key = self.next_key();
        (self.text.format(key), key)
    }
}

/// `0..N` of a run's keys as the report writes it.
pub(crate) fn key_range(n: u64) -> String {
    format!("random keys 0..{}", crate::report::group(n as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_uniform_in_range_and_repeat_per_connection() {
        let mut k = Keys::new(10, 0);
        let mut seen = [0u32; 10];
        for _ in 0..100_000 {
            seen[k.next_key() as usize] += 1;
        }
        // Each of 10 keys about 10,000 times (a binomial's sd is 95).
        assert!(
            seen.iter().all(|&n| (9_500..10_500).contains(&n)),
            "{seen:?}"
        );
        let draw = |conn| {
            let mut k = Keys::new(1 << 40, conn);
            (0..5).map(|_| k.next_key()).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        assert!(draw(0).iter().all(|&k| k < 1 << 40));
        let mut one = Keys::new(1, 7);
        assert_eq!(one.next_text(), ("0", 0));
        let mut big = Keys::new(u64::MAX, 0);
        let (text, key) = big.next_text();
        assert_eq!(text, key.to_string());
        assert_eq!(key_range(1_000_000), "random keys 0..1,000,000");
    }
}
