//! Which row a claim takes, decided from the pool's rows and the database's `now`: the
//! preferred ID if free, else the lowest expired or unused one; a static ID only itself.

use super::{Claimed, to_u64};

/// Which row a claim takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Choice {
    /// A row whose lease expired (or was released), with its mark.
    Expired { machine: i64, mark_ms: i64 },
    /// An ID without a row.
    Unused { machine: i64 },
}

impl Choice {
    pub(super) fn claimed(self) -> Claimed {
        match self {
            Choice::Expired { machine, mark_ms } => Claimed {
                machine: to_u64(machine),
                mark_ms: to_u64(mark_ms),
            },
            Choice::Unused { machine } => Claimed {
                machine: to_u64(machine),
                mark_ms: 0,
            },
        }
    }
}

/// A static ID's row: taken when free, else who holds it and for how long (ms).
pub(super) fn choose_fixed(
    rows: &[(i64, String, i64, i64)],
    now: i64,
    id: i64,
) -> Result<Choice, Option<(String, i64)>> {
    match rows.iter().find(|r| r.0 == id) {
        Some(r) if r.2 < now => Ok(Choice::Expired {
            machine: id,
            mark_ms: r.3,
        }),
        Some(r) => Err(Some((r.1.clone(), r.2 - now))),
        None => Ok(Choice::Unused { machine: id }),
    }
}

/// The preferred ID if free, else the lowest free one: expired rows and IDs without a row
/// alike. `rows` are the pool's rows by machine ID: (machine, holder, expires_ms, mark_ms).
pub(super) fn choose(
    rows: &[(i64, String, i64, i64)],
    now: i64,
    lo: i64,
    hi: i64,
    preferred: Option<i64>,
) -> Option<Choice> {
    let free = |m: i64| -> Option<Choice> {
        match rows.iter().find(|r| r.0 == m) {
            Some(r) if r.2 < now => Some(Choice::Expired {
                machine: m,
                mark_ms: r.3,
            }),
            Some(_) => None,
            None => Some(Choice::Unused { machine: m }),
        }
    };
    if let Some(m) = preferred.filter(|m| (lo..=hi).contains(m))
        && let Some(c) = free(m)
    {
        return Some(c);
    }
    // The lowest expired row, or the lowest ID without a row: whichever is lower.
    let expired = rows.iter().find(|r| r.2 < now).map(|r| r.0);
    let mut unused = lo;
    for r in rows {
        if r.0 == unused {
            unused += 1;
        } else if r.0 > unused {
            break;
        }
    }
    let unused = (unused <= hi).then_some(unused);
    match (expired, unused) {
        (Some(e), Some(u)) => free(e.min(u)),
        (Some(e), None) => free(e),
        (None, Some(u)) => free(u),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(m: i64, expires: i64, mark: i64) -> (i64, String, i64, i64) {
        (m, "h:1:0".into(), expires, mark)
    }

    #[test]
    fn the_lowest_free_id_is_taken_expired_or_unused() {
        let now = 1_000;
        assert_eq!(
            choose(&[], now, 0, 3, None),
            Some(Choice::Unused { machine: 0 })
        );
        let rows = [row(0, 2_000, 5), row(1, 2_000, 5), row(3, 2_000, 5)];
        assert_eq!(
            choose(&rows, now, 0, 3, None),
            Some(Choice::Unused { machine: 2 })
        );
        let rows = [row(0, 2_000, 5), row(1, 999, 7), row(2, 2_000, 5)];
        assert_eq!(
            choose(&rows, now, 0, 3, None),
            Some(Choice::Expired {
                machine: 1,
                mark_ms: 7
            })
        );
        let full = [row(0, 2_000, 5), row(1, 2_000, 5)];
        assert_eq!(choose(&full, now, 0, 1, None), None);
        // A lease expiring exactly now is still held (expiry is strictly before now).
        assert_eq!(choose(&[row(0, 1_000, 5)], now, 0, 0, None), None);
    }

    #[test]
    fn the_preferred_id_wins_when_free() {
        let now = 1_000;
        let rows = [row(0, 500, 1), row(5, 500, 9)];
        assert_eq!(
            choose(&rows, now, 0, 9, Some(5)),
            Some(Choice::Expired {
                machine: 5,
                mark_ms: 9
            })
        );
        let rows = [row(0, 500, 1), row(5, 2_000, 9)];
        assert_eq!(
            choose(&rows, now, 0, 9, Some(5)),
            Some(Choice::Expired {
                machine: 0,
                mark_ms: 1
            })
        );
        assert_eq!(
            choose(&[], now, 0, 9, Some(42)),
            Some(Choice::Unused { machine: 0 }),
            "a preferred ID outside the pool is ignored"
        );
    }
}
