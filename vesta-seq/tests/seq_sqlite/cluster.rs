//! Two or three members on one real SQLite file, in one process (each member its own
//! `Sequences` and `Cluster`, as two servers would be): the sets split fairly, calls on
//! another member's set are answered with it, a member joining, leaving cleanly, losing its
//! lease in an outage, and a second process on one member ID. A caller follows the answers as
//! a client does; every key's numbers must strictly increase across all of it (one caller per
//! key, so each call begins after the last ended).

use std::time::{Duration, Instant};

use vesta_seq::cluster::{Cluster, ClusterOptions, ClusterStatus, Route};
use vesta_seq::sets::SETS;
use vesta_seq::{Owner, SeqError, SeqKey, Sequences};

use super::{Checker, locker, open_as, options};

/// The lease of the tests that wait for expiries (short, so they are quick).
const TTL: Duration = Duration::from_millis(800);
/// The lease of the hand-off test, long against its beat (ttl / 6), so "a clean leave moves
/// the sets well before the lease could expire" holds on a loaded machine.
const LONG_TTL: Duration = Duration::from_secs(4);

async fn member(dir: &std::path::Path, id: u64) -> (Sequences, Cluster) {
    member_with(dir, id, TTL).await
}

async fn member_with(dir: &std::path::Path, id: u64, ttl: Duration) -> (Sequences, Cluster) {
    let seqs = open_as(dir, options(50), Owner::member()).await.unwrap();
    let cluster = Cluster::join(
        &seqs,
        ClusterOptions {
            member: id,
            tcp: format!("127.0.0.1:{}", 7000 + id),
            rest: String::new(),
            ttl,
        },
    )
    .await
    .unwrap();
    (seqs, cluster)
}

/// One call as a client makes it: to `members[at]` first, following a move to the member
/// named, retrying while the set moves or a term lapsed, for at most `within`.
async fn call(members: &[(u64, &Sequences)], key: &SeqKey, within: Duration) -> u64 {
    let deadline = Instant::now() + within;
    let mut at = 0;
    loop {
        match members[at].1.next(key).await {
            Ok(n) => return n,
            Err(SeqError::Moved { member, .. }) => {
                at = members
                    .iter()
                    .position(|(id, _)| *id == member)
                    .unwrap_or_else(|| panic!("moved to member {member}, not one of ours"));
            }
            Err(
                e @ (SeqError::Moving { .. }
                | SeqError::Lapsed { .. }
                | SeqError::Unavailable { .. }),
            ) => {
                assert!(
                    Instant::now() < deadline,
                    "key {key}: not served within {within:?}: {e}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("key {key}: {e}"),
        }
    }
}

/// Waits (bounded) until the members serve `want` sets each, within their terms, and every
/// set is routed (none between owners) by each of them; and `also` holds.
async fn until_split_and(
    clusters: &[&Cluster],
    want: &[usize],
    within: Duration,
    also: impl Fn(&[ClusterStatus]) -> bool,
) {
    let deadline = Instant::now() + within;
    loop {
        let status: Vec<ClusterStatus> = clusters.iter().map(|c| c.status()).collect();
        let owned: Vec<usize> = status.iter().map(|c| c.sets_owned).collect();
        let settled = clusters.iter().all(|c| {
            c.routes()
                .iter()
                .all(|r| !matches!(r, Route::Moving { .. }))
        });
        if owned == want && settled && status.iter().all(|c| c.term_left_ms > 0) && also(&status) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "sets owned {owned:?}, want {want:?}, routes settled {settled}: {status:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn until_split(clusters: &[&Cluster], want: &[usize], within: Duration) {
    until_split_and(clusters, want, within, |_| true).await;
}

fn keys() -> Vec<SeqKey> {
    // Sections 0..6 (sets 0..6), a far section, and string keys in assorted buckets.
    let mut keys: Vec<SeqKey> = (0..6u64).map(|s| SeqKey::Num(s * 100_000 + 7)).collect();
    keys.push(SeqKey::Num(u64::MAX));
    for k in ["chat:1", "chat:2", "Zürich", "会话-9"] {
        keys.push(SeqKey::parse(k.as_bytes()).unwrap());
    }
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_split_the_sets_route_to_each_other_and_hand_off_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys();
    let mut check = Checker::default();
    let (a, ca) = member_with(dir.path(), 930, LONG_TTL).await;
    // Alone, A takes every set at its join.
    assert_eq!(ca.status().sets_owned, SETS as usize);
    for k in &keys {
        let n = call(&[(930, &a)], k, LONG_TTL * 2).await;
        check.saw(k, n, n);
    }

    let (b, cb) = member_with(dir.path(), 931, LONG_TTL).await;
    until_split(&[&ca, &cb], &[128, 128], LONG_TTL * 2).await;
    // Each set has one server; the other answers with it.
    let ra = ca.routes();
    let rb = cb.routes();
    for s in 0..SETS as usize {
        match (&ra[s], &rb[s]) {
            (
                Route::Here,
                Route::Owner {
                    member: 930, tcp, ..
                },
            ) => assert_eq!(tcp, "127.0.0.1:7930"),
            (Route::Owner { member: 931, .. }, Route::Here) => {}
            other => panic!("set {s}: {other:?}"),
        }
    }
    let moved = keys.iter().find_map(|k| match a.next(k).now_or_err() {
        Some(SeqError::Moved {
            member, tcp, set, ..
        }) => Some((member, tcp, set)),
        _ => None,
    });
    let (member_id, tcp, set) = moved.expect("some key's set is B's");
    assert_eq!((member_id, tcp.as_str()), (931, "127.0.0.1:7931"));
    assert!(set < SETS);

    for round in 0..20 {
        for k in &keys {
            let from = if round % 2 == 0 {
                [(930, &a), (931, &b)]
            } else {
                [(931, &b), (930, &a)]
            };
            let n = call(&from, k, LONG_TTL * 2).await;
            check.saw(k, n, n);
        }
    }

    // A leaves cleanly: B takes its sets at its next beat, well before A's lease would expire.
    let left = Instant::now();
    ca.leave().await.unwrap();
    until_split(&[&cb], &[256], LONG_TTL).await;
    let took = left.elapsed();
    assert!(took < LONG_TTL, "B took A's sets {took:?} after A left");
    for k in &keys {
        let n = call(&[(931, &b)], k, LONG_TTL * 2).await;
        check.saw(k, n, n);
        // A serves nothing any more.
        assert!(a.next(k).await.is_err());
    }
    assert_eq!(cb.status().members, 1);
    assert_eq!(check.answers, keys.len() as u64 * 22);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_lapses_every_term_and_the_sets_come_back_without_a_number_twice() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys();
    let mut check = Checker::default();
    let (a, ca) = member(dir.path(), 930).await;
    let (b, cb) = member(dir.path(), 931).await;
    until_split(&[&ca, &cb], &[128, 128], TTL * 8).await;
    let both = [(930, &a), (931, &b)];
    for k in &keys {
        let n = call(&both, k, TTL * 8).await;
        check.saw(k, n, n);
    }
    // The database is unreachable for two leases: no renewal is confirmed, so within a window
    // (2/3 of the lease) each member stops serving, even keys it has numbers for in memory.
    let lock_pool = locker(dir.path()).await;
    let lock = lock_pool.begin_with("BEGIN EXCLUSIVE").await.unwrap();
    let began = Instant::now();
    tokio::time::sleep(TTL * 2 / 3 + Duration::from_millis(100)).await;
    // Refused, whichever way: out of its term, or (once the lease itself expired on a slow
    // host and the member stopped its sets) between owners.
    for k in &keys {
        for (_, s) in &both {
            match s.next(k).await {
                Err(SeqError::Lapsed { .. } | SeqError::Moved { .. } | SeqError::Moving { .. }) => {
                }
                other => panic!(
                    "key {k} served {:?} after the term lapsed",
                    other.map_err(|e| e.to_string())
                ),
            }
        }
    }
    tokio::time::sleep((TTL * 2).saturating_sub(began.elapsed())).await;
    lock.rollback().await.unwrap();
    // Back: both leases expired; each member finds its lease gone, drops everything, joins as
    // a new incarnation and takes its share again from the rows.
    until_split_and(&[&ca, &cb], &[128, 128], TTL * 10, |s| {
        s.iter().all(|c| c.leases_lost >= 1)
    })
    .await;
    for k in &keys {
        let n = call(&both, k, TTL * 8).await;
        check.saw(k, n, n);
    }
    lock_pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_on_one_member_id_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_a, _ca) = member(dir.path(), 930).await;
    let seqs = open_as(dir.path(), options(50), Owner::member())
        .await
        .unwrap();
    let began = Instant::now();
    let err = Cluster::join(
        &seqs,
        ClusterOptions {
            member: 930,
            tcp: "127.0.0.1:1".into(),
            rest: String::new(),
            ttl: TTL,
        },
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("member 930 (this server's machine ID) is held by") && !text.contains('\n'),
        "{text}"
    );
    // It waited (bounded) for the holder's lease to run out, which a live holder renews.
    assert!(began.elapsed() >= TTL, "{:?}", began.elapsed());
    let ttl = Cluster::join(
        &seqs,
        ClusterOptions {
            member: 932,
            tcp: String::new(),
            rest: String::new(),
            ttl: Duration::from_millis(10),
        },
    )
    .await
    .unwrap_err();
    assert!(ttl.to_string().contains("seq.cluster_ttl_ms"), "{ttl}");
}

/// The error of a call that did not need the table, if it failed.
trait NowOrErr {
    fn now_or_err(self) -> Option<SeqError>;
}

impl<F: std::future::Future<Output = Result<u64, SeqError>>> NowOrErr for F {
    fn now_or_err(self) -> Option<SeqError> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(self);
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(r) => r.err(),
            std::task::Poll::Pending => None,
        }
    }
}
