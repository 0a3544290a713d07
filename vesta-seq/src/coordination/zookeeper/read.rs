//! The read: a `sync`, every set znode and the member list in one multi-read (one view), then
//! the members' data, turned into the beat's rows (a set's generation: its version + 1).

use zookeeper_client::{Error as ZkError, MultiReadResult};

use super::ZkCoordinator;
use super::session::Failure;
use super::sets::generation;
use crate::cluster::ClusterRows;
use crate::coordination::records::{self, now_ms};
use crate::sets::SETS;

impl ZkCoordinator {
    pub(super) async fn read_inner(&self) -> Result<ClusterRows, Failure> {
        let s = self.any_session().await?;
        let now_ms = now_ms();
        let prefix = self.prefix.clone();
        Self::call(&s, "sync", &prefix, s.client.sync(&prefix)).await?;
        let members_dir = self.members_dir();
        // Every set and the member list in one request: one view of them.
        let mut multi = s.client.new_multi_reader();
        for set in 0..SETS {
            multi
                .add_get_data(&self.set_path(set))
                .map_err(|cause| Failure::Op {
                    op: "read",
                    path: self.set_path(set),
                    cause,
                })?;
        }
        multi
            .add_get_children(&members_dir)
            .map_err(|cause| Failure::Op {
                op: "read",
                path: members_dir.clone(),
                cause,
            })?;
        let mut results = Self::call(&s, "read", &prefix, multi.commit()).await?;
        let listed = match results.pop() {
            Some(MultiReadResult::Children { children }) => children,
            Some(MultiReadResult::Error {
                err: ZkError::NoNode,
            }) => Vec::new(),
            Some(MultiReadResult::Error { err }) => {
                return Err(Failure::Op {
                    op: "list",
                    path: members_dir,
                    cause: err,
                });
            }
            _ => Vec::new(),
        };
        let mut sets = Vec::with_capacity(results.len());
        for (set, result) in results.into_iter().enumerate() {
            sets.push(match result {
                MultiReadResult::Data { data, stat } => Some((data, stat.version)),
                MultiReadResult::Error {
                    err: ZkError::NoNode,
                } => None,
                MultiReadResult::Error { err } => {
                    return Err(Failure::Op {
                        op: "get",
                        path: self.set_path(set as u32),
                        cause: err,
                    });
                }
                _ => None,
            });
        }
        // The members listed, after the sets: one gone since is dead.
        let mut members = Vec::new();
        if !listed.is_empty() {
            let mut multi = s.client.new_multi_reader();
            for name in &listed {
                let path = format!("{members_dir}/{name}");
                multi.add_get_data(&path).map_err(|cause| Failure::Op {
                    op: "read",
                    path,
                    cause,
                })?;
            }
            let results = Self::call(&s, "read", &members_dir, multi.commit()).await?;
            for (name, result) in listed.into_iter().zip(results) {
                match result {
                    MultiReadResult::Data { data, .. } => members.push((name, data)),
                    MultiReadResult::Error {
                        err: ZkError::NoNode,
                    } => {}
                    MultiReadResult::Error { err } => {
                        return Err(Failure::Op {
                            op: "get",
                            path: format!("{members_dir}/{name}"),
                            cause: err,
                        });
                    }
                    _ => {}
                }
            }
        }
        Ok(rows(&sets, &members, now_ms))
    }
}

/// The cluster's rows from the set znodes (by set: data and version, `None` when absent) and
/// the member znodes present (name, data), at `now_ms`: a set znode's generation is its version
/// + 1.
fn rows(
    sets: &[Option<(Vec<u8>, i32)>],
    members: &[(String, Vec<u8>)],
    now_ms: i64,
) -> ClusterRows {
    let sets = sets.iter().enumerate().filter_map(|(set, read)| {
        let (data, version) = read.as_ref()?;
        Some((
            u32::try_from(set).ok()?,
            data.as_slice(),
            generation(Some(*version)),
        ))
    });
    let members = members
        .iter()
        .map(|(name, data)| (name.as_str(), data.as_slice()));
    records::rows(sets, members, now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::is_live;

    #[test]
    fn znodes_read_as_rows_every_set_there_a_present_member_live() {
        let mut sets: Vec<Option<(Vec<u8>, i32)>> = vec![None; SETS as usize];
        sets[7] = Some((br#"{"owner":950,"holder":"h:1:a.3"}"#.to_vec(), 8));
        sets[8] = Some((br#"{"owner":null,"holder":""}"#.to_vec(), 9));
        sets[9] = Some((b"not json".to_vec(), 0));
        let rows = rows(
            &sets,
            &[
                (
                    "951".into(),
                    br#"{"holder":"h:2:b.1","tcp":"127.0.0.1:2","rest":""}"#.to_vec(),
                ),
                (
                    "950".into(),
                    br#"{"holder":"h:1:a.3","tcp":"127.0.0.1:1","rest":""}"#.to_vec(),
                ),
                ("x".into(), b"{}".to_vec()),
            ],
            1_000,
        );
        assert_eq!(
            rows.members.iter().map(|m| m.member).collect::<Vec<_>>(),
            [950, 951]
        );
        assert!(rows.members.iter().all(|m| is_live(m, rows.now_ms)));
        assert_eq!(rows.sets.len(), SETS as usize);
        let set = |s: usize| &rows.sets[s];
        assert_eq!(
            (set(7).owner, set(7).holder.as_str(), set(7).generation),
            (Some(950), "h:1:a.3", 9)
        );
        assert_eq!((set(8).owner, set(8).generation), (None, 10));
        assert_eq!((set(9).owner, set(9).generation), (None, 1));
        assert_eq!((set(0).owner, set(0).generation), (None, 0));
    }
}
