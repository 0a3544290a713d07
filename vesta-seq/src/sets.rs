//! Sets: the unit in which per-key sequences move between servers (seqsvr's "sets"; issue 34,
//! docs/seq-cluster.md). Every section belongs to one of [`SETS`] sets: numeric section `s` to
//! set `s % SETS`, string bucket `b` to set `b % SETS`, so consecutive numeric sections (users
//! signed up together, often busy together) land on different sets and servers.
//!
//! Who owns a set is computed, not stored: rendezvous (highest random weight) hashing with
//! bounded loads over the live members ([`table`]). Every server computes the same table from
//! the same members, with no leader to elect; each member holds its fair share to within one
//! set, and a member that joins takes its share and moves few others. The
//! coordination service decides who is live (a member's lease); the hand-off of a set that
//! changes owner is fenced there (docs/seq-cluster.md), never by this table alone.

use crate::key::SeqKey;

/// Sets the key space is cut into. Fixed for a table's life: changing it moves sections between
/// sets, so it will be pinned in the table's meta rows as the section sizes are.
pub const SETS: u32 = vesta_core::seq_place::SEQ_SETS;

/// One set of sections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SetId(u32);

impl SetId {
    /// The set numbered `n` (0..[`SETS`]), if there is one.
    pub fn new(n: u32) -> Option<SetId> {
        (n < SETS).then_some(SetId(n))
    }

    /// Its number, 0..[`SETS`].
    pub fn get(self) -> u32 {
        self.0
    }

    /// Every set, in order.
    pub fn all() -> impl Iterator<Item = SetId> {
        (0..SETS).map(SetId)
    }
}

impl SeqKey {
    /// The set the key's section belongs to.
    pub fn set(&self) -> SetId {
        SetId(self.place().set())
    }
}

/// The owner of every set among `members` (machine IDs), in set order; empty without members.
///
/// Rendezvous hashing with bounded loads: every (set, member) pair has a score, and going down
/// the pairs from the highest score, a set goes to the member of the pair unless the set is
/// taken or the member already holds its fair share (`SETS / members`, rounded up for the
/// first `SETS % members` members in machine-ID order, down for the rest). So every member holds
/// its fair share to within one set, the table depends only on the set of members (not their
/// order), and a member joining takes its share and moves few sets between the others (one
/// leaving, the reverse). That is the bounded loads' price: the join changes every member's cap
/// (and which members get the extra set), and a member over its new cap pushes a set along a
/// chain. Per set the joiner takes, sets moved between the others (random joins, measured):
/// 0.28 on average and 2.1 at worst for clusters of 1-23 members; 3.0 on average and 6.5 at
/// worst (13 sets for the joiner's 2) for 99. There is no closed-form bound; the test pins 3
/// times the joiner's share on a fixed sample of small clusters.
pub fn table(members: &[u64]) -> Vec<u64> {
    let mut members = members.to_vec();
    members.sort_unstable();
    members.dedup();
    let n = members.len();
    if n == 0 {
        return Vec::new();
    }
    let sets = SETS as usize;
    let cap = |i: usize| sets / n + usize::from(i < sets % n);
    let mut pairs: Vec<(u64, u32, usize)> = Vec::with_capacity(sets * n);
    for s in SetId::all() {
        for (i, &m) in members.iter().enumerate() {
            pairs.push((score(s, m), s.0, i));
        }
    }
    // Highest score first; ties (all but impossible with 64-bit scores) by set, then member.
    pairs.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut owner = vec![usize::MAX; sets];
    let mut held = vec![0usize; n];
    let mut left = sets;
    for (_, s, i) in pairs {
        let s = s as usize;
        if owner[s] == usize::MAX && held[i] < cap(i) {
            owner[s] = i;
            held[i] += 1;
            left -= 1;
            if left == 0 {
                break;
            }
        }
    }
    owner.into_iter().map(|i| members[i]).collect()
}

/// The member that owns `set` among `members` (see [`table`]); `None` without members.
pub fn owner(set: SetId, members: &[u64]) -> Option<u64> {
    table(members).get(set.0 as usize).copied()
}

/// The rendezvous score of `member` for `set`: SplitMix64's finaliser over both, a fixed
/// function (every server and every version must agree on it).
fn score(set: SetId, member: u64) -> u64 {
    let mut z = member
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(u64::from(set.0) << 32 | u64::from(set.0));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::key::{SECTION_KEYS, STRING_BUCKETS};

    proptest! {
        /// A client computes a key's set from its bytes (`vesta_core::seq_place`): always the
        /// set of the section the key lives in here.
        #[test]
        fn a_clients_set_is_the_keys_set(n in any::<u64>(), text in "\\PC{1,40}") {
            for bytes in [n.to_string().into_bytes(), text.clone().into_bytes()] {
                if let Ok(key) = SeqKey::parse(&bytes) {
                    prop_assert_eq!(key.set().get(), vesta_core::seq_place::seq_set_of(&bytes));
                }
            }
        }
    }

    fn shares(members: &[u64]) -> Vec<usize> {
        let t = table(members);
        members
            .iter()
            .map(|m| t.iter().filter(|o| *o == m).count())
            .collect()
    }

    #[test]
    fn consecutive_sections_and_buckets_spread_over_every_set() {
        let key = |k: u64| SeqKey::Num(k).set().get();
        assert_eq!(key(0), 0);
        assert_eq!(key(SECTION_KEYS - 1), 0, "one section, one set");
        assert_eq!(key(SECTION_KEYS), 1);
        assert_eq!(key(u64::from(SETS) * SECTION_KEYS), 0);
        assert_eq!(key(u64::MAX), ((u64::MAX / SECTION_KEYS) % 256) as u32);
        assert_eq!(
            STRING_BUCKETS % u64::from(SETS),
            0,
            "each set the same number of buckets"
        );
        let mut seen = [false; SETS as usize];
        for i in 0..10_000 {
            seen[SeqKey::parse(format!("user:{i}").as_bytes())
                .unwrap()
                .set()
                .get() as usize] = true;
        }
        assert!(seen.iter().all(|s| *s), "string keys reach every set");
    }

    #[test]
    fn every_member_holds_its_fair_share_to_within_one_set() {
        for n in 1..=40u64 {
            let members: Vec<u64> = (924..924 + n).collect();
            let fair = SETS as usize / n as usize;
            for (m, got) in members.iter().zip(shares(&members)) {
                assert!(
                    got == fair || got == fair + 1,
                    "{n} members: {m} owns {got} sets, fair {fair}"
                );
            }
        }
        assert_eq!(shares(&[924]), [256]);
        assert_eq!(owner(SetId::new(7).unwrap(), &[924]), Some(924));
        assert!(table(&[]).is_empty());
        assert_eq!(SetId::new(SETS), None);
    }

    /// The longest chain found so far (by a random draw in CI): 826 joining these 23 takes its
    /// 10 sets and moves 21 between the others, 2.1 times its share.
    #[test]
    fn the_longest_known_chain_stays_within_the_bound() {
        let members = [
            3, 24, 83, 97, 108, 185, 228, 242, 311, 385, 422, 474, 478, 499, 595, 669, 721, 746,
            841, 887, 890, 895, 989,
        ];
        let before = table(&members);
        let after = table(&[&members[..], &[826]].concat());
        let taken = after.iter().filter(|a| **a == 826).count();
        let shuffled = before
            .iter()
            .zip(&after)
            .filter(|(b, a)| a != b && **a != 826)
            .count();
        assert_eq!((taken, shuffled), (10, 21));
    }

    proptest! {
        // A fixed sample, the same every run: how many sets a join moves between the others has
        // no closed-form bound (see [`table`]), so the bound below is checked on these cases,
        // not on a fresh draw that could one day find a longer chain.
        #![proptest_config(ProptestConfig {
            cases: 256,
            rng_seed: proptest::test_runner::RngSeed::Fixed(34),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// The table depends on the members only, not their order; a member joining takes its
        /// share and moves few sets between the others (at most 3 times its share here;
        /// measured: 2.1 at worst, 0.28 on average); leaving again restores the table exactly.
        #[test]
        fn joins_and_leaves_move_few_sets(
            members in proptest::collection::btree_set(0u64..1024, 1..24),
            joiner in 0u64..1024,
        ) {
            let members: Vec<u64> = members.into_iter().collect();
            prop_assume!(!members.contains(&joiner));
            let before = table(&members);
            let mut reversed = members.clone();
            reversed.reverse();
            prop_assert_eq!(&table(&reversed), &before);
            let mut joined = members.clone();
            joined.push(joiner);
            let after = table(&joined);
            let taken = after.iter().filter(|a| **a == joiner).count();
            let shuffled = before
                .iter()
                .zip(&after)
                .filter(|(b, a)| a != b && **a != joiner)
                .count();
            prop_assert_eq!(taken, SETS as usize / joined.len()
                + usize::from(joined.iter().filter(|m| **m < joiner).count() < SETS as usize % joined.len()));
            prop_assert!(shuffled <= 3 * taken, "{} sets moved between the others, {} taken", shuffled, taken);
            let left: Vec<u64> = joined.iter().copied().filter(|m| *m != joiner).collect();
            prop_assert_eq!(table(&left), before);
        }
    }
}
