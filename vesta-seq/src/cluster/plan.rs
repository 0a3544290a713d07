//! What a member does at a beat, decided from one read of the cluster's rows and nothing else:
//! pure, so the hand-off rules are unit-tested without a database or a clock.
//!
//! Per set, with `target` the set's owner in the table over the live members ([`table`]):
//! - a set this incarnation owns and the table gives to another: **release** it (the caller
//!   stops serving it first);
//! - a set the table gives to this member, owned by nobody (released) or by an incarnation
//!   that is **dead** (its lease expired, or its member row was taken by a later incarnation):
//!   **take** it, by compare-and-set on the generation read;
//! - a set another live incarnation owns: wait for it to release.
//!
//! A dead incarnation stays dead: a lease is renewed only while unexpired, so once the database
//! clock passed its expiry nothing can bring it back (it joins again as a new incarnation, which
//! owns nothing). Judging it from a read taken after `now_ms` is therefore safe.
//!
//! [`table`]: crate::sets::table

use crate::db::seq_cluster::{ClusterRows, MemberRow, SetRow};
use crate::sets::table;

/// What to do with one set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Stop serving the set, then release it from `generation`.
    Release { set: u32, generation: i64 },
    /// Take the set from `generation`, then serve it.
    Take { set: u32, generation: i64 },
    /// The set is this incarnation's at `generation` and stays so: serve it.
    Keep { set: u32, generation: i64 },
}

/// Who answers a set's keys, as a member that does not own it tells a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// This member serves it.
    Here,
    /// A live member serves it.
    Owner {
        /// The member (its machine ID).
        member: u64,
        /// Its TCP address (`""`: none).
        tcp: String,
        /// Its REST address (`""`: none).
        rest: String,
    },
    /// Between owners: released, or its owner's lease ran out and nobody has taken it yet.
    Moving {
        /// The member the table gives it to, if any is live.
        to: Option<u64>,
    },
}

/// The decisions of one beat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub actions: Vec<Action>,
    /// Per set, who serves it now (before this plan's actions).
    pub routes: Vec<Route>,
    /// The table's owner per set (empty without live members).
    pub table: Vec<u64>,
    /// The live members, by member.
    pub live: Vec<MemberRow>,
}

/// Whether `row` holds an unexpired lease at `now_ms`.
pub(crate) fn is_live(row: &MemberRow, now_ms: i64) -> bool {
    !row.holder.is_empty() && row.expires_ms >= now_ms
}

/// The live incarnation `holder`'s member row, if it is live.
fn live_holder<'a>(rows: &'a ClusterRows, set: &SetRow) -> Option<&'a MemberRow> {
    let owner = set.owner?;
    rows.members
        .iter()
        .find(|m| m.member == owner && m.holder == set.holder && is_live(m, rows.now_ms))
}

/// The plan of member `me`, incarnation `holder`, from `rows`.
pub(crate) fn plan(rows: &ClusterRows, me: u64, holder: &str) -> Plan {
    let live: Vec<MemberRow> = rows
        .members
        .iter()
        .filter(|m| is_live(m, rows.now_ms))
        .cloned()
        .collect();
    let ids: Vec<u64> = live.iter().map(|m| m.member).collect();
    let table = table(&ids);
    let mut actions = Vec::new();
    let mut routes = Vec::with_capacity(rows.sets.len());
    for set in &rows.sets {
        let target = table.get(set.set as usize).copied();
        let mine = !holder.is_empty() && set.holder == holder && set.owner == Some(me);
        let owner = live_holder(rows, set);
        routes.push(match (mine, owner) {
            (true, _) => Route::Here,
            (false, Some(m)) => Route::Owner {
                member: m.member,
                tcp: m.tcp.clone(),
                rest: m.rest.clone(),
            },
            (false, None) => Route::Moving { to: target },
        });
        let generation = set.generation;
        let s = set.set;
        if mine {
            actions.push(if target == Some(me) {
                Action::Keep { set: s, generation }
            } else {
                Action::Release { set: s, generation }
            });
        } else if target == Some(me) && owner.is_none() {
            actions.push(Action::Take { set: s, generation });
        }
    }
    Plan {
        actions,
        routes,
        table,
        live,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sets::SETS;

    fn member(member: u64, holder: &str, expires_ms: i64) -> MemberRow {
        MemberRow {
            member,
            holder: holder.into(),
            tcp: format!("127.0.0.1:{}", 7000 + member),
            rest: String::new(),
            expires_ms,
        }
    }

    fn sets(owner: impl Fn(u32) -> Option<(u64, &'static str)>) -> Vec<SetRow> {
        (0..SETS)
            .map(|s| SetRow {
                set: s,
                owner: owner(s).map(|o| o.0),
                holder: owner(s).map_or(String::new(), |o| o.1.into()),
                generation: 5,
            })
            .collect()
    }

    fn count(plan: &Plan, f: impl Fn(&Action) -> bool) -> usize {
        plan.actions.iter().filter(|a| f(a)).count()
    }

    #[test]
    fn a_lone_member_takes_every_released_set() {
        let rows = ClusterRows {
            now_ms: 1_000,
            members: vec![member(930, "a", 2_000)],
            sets: sets(|_| None),
        };
        let p = plan(&rows, 930, "a");
        assert_eq!(
            count(&p, |a| matches!(a, Action::Take { generation: 5, .. })),
            256
        );
        assert!(
            p.routes
                .iter()
                .all(|r| *r == Route::Moving { to: Some(930) })
        );
    }

    #[test]
    fn a_live_owner_is_waited_for_and_routed_to() {
        // 931 owns everything and is live; 930 joined: the table gives 930 half, but 931 must
        // release first.
        let rows = ClusterRows {
            now_ms: 1_000,
            members: vec![member(930, "a", 2_000), member(931, "b", 2_000)],
            sets: sets(|_| Some((931, "b"))),
        };
        let joiner = plan(&rows, 930, "a");
        assert!(joiner.actions.is_empty(), "{:?}", joiner.actions);
        assert!(
            joiner
                .routes
                .iter()
                .all(|r| matches!(r, Route::Owner { member: 931, .. }))
        );
        let owner = plan(&rows, 931, "b");
        let released = count(&owner, |a| matches!(a, Action::Release { .. }));
        assert_eq!(released, 128, "a fair share moves");
        assert_eq!(count(&owner, |a| matches!(a, Action::Keep { .. })), 128);
    }

    #[test]
    fn a_dead_owners_sets_are_taken_only_once_its_lease_expired() {
        let at = |now_ms| ClusterRows {
            now_ms,
            members: vec![member(930, "a", 10_000), member(931, "b", 2_000)],
            sets: sets(|_| Some((931, "b"))),
        };
        // Before the expiry, 931 is live: nothing is taken.
        assert!(plan(&at(2_000), 930, "a").actions.is_empty());
        // After it, 931 is no member: 930 is the table's only member and takes every set.
        let p = plan(&at(2_001), 930, "a");
        assert_eq!(count(&p, |a| matches!(a, Action::Take { .. })), 256);
        assert!(
            p.routes
                .iter()
                .all(|r| *r == Route::Moving { to: Some(930) })
        );
    }

    #[test]
    fn an_earlier_incarnation_of_oneself_is_taken_from_not_trusted() {
        // Member 930's row is now incarnation "a2": sets still naming "a1" (which lost its
        // lease) are taken by compare-and-set like anyone's, never served as they are.
        let rows = ClusterRows {
            now_ms: 1_000,
            members: vec![member(930, "a2", 2_000)],
            sets: sets(|_| Some((930, "a1"))),
        };
        let p = plan(&rows, 930, "a2");
        assert_eq!(count(&p, |a| matches!(a, Action::Take { .. })), 256);
        assert_eq!(count(&p, |a| matches!(a, Action::Keep { .. })), 0);
    }

    #[test]
    fn a_member_that_left_is_no_member() {
        // A clean leave empties the holder: the member's released sets go to the others.
        let rows = ClusterRows {
            now_ms: 1_000,
            members: vec![member(930, "a", 2_000), member(931, "", 0)],
            sets: sets(|s| (s % 2 == 0).then_some((930, "a"))),
        };
        let p = plan(&rows, 930, "a");
        assert_eq!(count(&p, |a| matches!(a, Action::Take { .. })), 128);
        assert_eq!(count(&p, |a| matches!(a, Action::Keep { .. })), 128);
        assert_eq!(p.live.len(), 1);
    }

    #[test]
    fn no_two_members_take_one_set_from_one_read() {
        // Whatever the rows, two members' plans from the same read never both take a set
        // (and the generation compare-and-set settles reads that differ).
        let rows = ClusterRows {
            now_ms: 1_000,
            members: vec![
                member(930, "a", 2_000),
                member(931, "b", 2_000),
                member(932, "c", 500),
            ],
            sets: sets(|s| match s % 3 {
                0 => Some((932, "c")),
                1 => Some((931, "b")),
                _ => None,
            }),
        };
        let a = plan(&rows, 930, "a");
        let b = plan(&rows, 931, "b");
        for s in 0..SETS {
            let takes = |p: &Plan| {
                p.actions
                    .iter()
                    .any(|x| matches!(x, Action::Take { set, .. } if *set == s))
            };
            assert!(!(takes(&a) && takes(&b)), "set {s}");
        }
    }
}
