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

/// What the `N` keys of a seq run look like (`--seq-shape`); key `i` of `0..N` is:
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyShape {
    /// `i` itself: dense numeric keys (user IDs from a counter), 100,000 to a section.
    #[default]
    Dense,
    /// A snowflake-sized number (about 4e17: `400000000000000000 + splitmix64(i) % 1e17`): user
    /// IDs that are snowflake IDs, one to a range of 100,000.
    Sparse,
    /// Text of 16 to 24 bytes: `user:` and `i * 7919` in 11 to 19 digits (`i % 9` more than
    /// 11), distinct for every `i` below 12,627,000.
    Text,
}

impl KeyShape {
    /// Its name in reports and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            KeyShape::Dense => "dense",
            KeyShape::Sparse => "sparse",
            KeyShape::Text => "string",
        }
    }

    /// The key `i` of a run, as text.
    pub fn key(self, i: u64, out: &mut String) {
        out.clear();
        match self {
            KeyShape::Dense => out.push_str(itoa::Buffer::new().format(i)),
            KeyShape::Sparse => out.push_str(itoa::Buffer::new().format(sparse(i))),
            KeyShape::Text => {
                let n = i.wrapping_mul(7919);
                let mut digits = itoa::Buffer::new();
                let digits = digits.format(n);
                let width = 11 + (i % 9) as usize;
                out.push_str("user:");
                for _ in digits.len()..width {
                    out.push('0');
                }
                out.push_str(digits);
            }
        }
    }
}

/// The snowflake-sized key `i` names: 4e17 and splitmix64's finaliser of `i` modulo 1e17.
pub fn sparse(i: u64) -> u64 {
    400_000_000_000_000_000 + mix(i.wrapping_add(0x9E37_79B9_7F4A_7C15)) % 100_000_000_000_000_000
}

/// SplitMix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The keys of one connection: splitmix64 (Steele, Lea and Flood; the seeding generator of
/// the xoshiro family), seeded by the connection's index, mapped onto `0..n` by a multiply
/// and a shift (Lemire), and shaped by [`KeyShape`]. The bias of the mapping is below
/// `n / 2^64`: none that a run could see. The same connection index draws the same keys in
/// every run, so vesta and its peers are asked for the same keys in the same order.
#[derive(Clone)]
pub(crate) struct Keys {
    state: u64,
    n: u64,
    shape: KeyShape,
    text: String,
}

impl Keys {
    /// Keys in `0..n` (n ≥ 1) for connection `conn`.
    pub(crate) fn new(n: u64, conn: usize) -> Self {
        Keys::shaped(n, conn, KeyShape::Dense)
    }

    /// Keys `0..n` of `shape` for connection `conn`.
    pub(crate) fn shaped(n: u64, conn: usize, shape: KeyShape) -> Self {
        Keys {
            // Distinct, well-spread seeds per connection; never the same stream twice.
            state: (conn as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED_5EED,
            n: n.max(1),
            shape,
            text: String::with_capacity(32),
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

    /// The next key as text, and its number (a dense or sparse key's value; a string key's
    /// index).
    pub(crate) fn next_text(&mut self) -> (&str, u64) {
        let i = self.next_key();
        self.shape.key(i, &mut self.text);
        let key = match self.shape {
            KeyShape::Sparse => sparse(i),
            KeyShape::Dense | KeyShape::Text => i,
        };
        (&self.text, key)
    }
}

/// A run's keys as the report writes it.
pub(crate) fn key_range(n: u64, shape: KeyShape) -> String {
    let n = crate::report::group(n as f64);
    match shape {
        KeyShape::Dense => format!("random keys 0..{n}"),
        KeyShape::Sparse => format!("{n} random snowflake-sized keys (about 4e17)"),
        KeyShape::Text => format!("{n} random string keys of 16-24 bytes"),
    }
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
        assert_eq!(
            key_range(1_000_000, KeyShape::Dense),
            "random keys 0..1,000,000"
        );
        let mut sparse_keys = Keys::shaped(1_000, 0, KeyShape::Sparse);
        let mut text_keys = Keys::shaped(1_000, 0, KeyShape::Text);
        let mut dense_keys = Keys::new(1_000, 0);
        for _ in 0..1_000 {
            let i = dense_keys.next_key();
            let (text, k) = sparse_keys.next_text();
            assert_eq!((text, k), (sparse(i).to_string().as_str(), sparse(i)));
            assert!((4e17 as u64..5e17 as u64).contains(&k));
            let (text, k) = text_keys.next_text();
            assert_eq!(k, i);
            assert!(
                (16..=24).contains(&text.len()) && text.starts_with("user:"),
                "{text}"
            );
        }
        let mut a = String::new();
        let mut b = String::new();
        KeyShape::Text.key(12_626_999, &mut a);
        KeyShape::Text.key(12_626_998, &mut b);
        assert_ne!(a, b);
        assert_eq!(a.len(), 5 + 11 + 12_626_999 % 9);
    }
}
