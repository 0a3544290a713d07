//! Set znodes written at a generation (version + 1; 0: never created): a take or a release is
//! a `create` or a `setData` at the version read, a chunk of them in one multi fenced by the
//! taker's member znode; a chunk that loses a compare is retried set by set.

use zookeeper_client::{CreateMode, MultiWriteError};

use super::ZkCoordinator;
use super::session::{Failure, Session};
use crate::coordination::records::Set;

/// Set writes per multi: a chunk that fails is retried set by set.
const PER_MULTI: usize = 64;

/// How a set is written at a generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Write {
    /// Generation 0: never written, so created.
    Create,
    /// `setData` at this version.
    At(i32),
}

/// A set znode's generation: its version + 1, 0 when absent.
pub(super) fn generation(version: Option<i32>) -> i64 {
    version.map_or(0, |v| i64::from(v) + 1)
}

/// How to write a set read at `generation` (`None`: no znode has it, so nothing matches).
pub(super) fn write_at(generation: i64) -> Option<Write> {
    match generation {
        0 => Some(Write::Create),
        g => i32::try_from(g - 1).ok().filter(|v| *v >= 0).map(Write::At),
    }
}

impl ZkCoordinator {
    /// Writes `value` on each `(set, generation)` still at that generation, each multi fenced
    /// by `fence` (a znode and the version it must have): a chunk at a time, a chunk that
    /// failed set by set. How many were written.
    pub(super) async fn put_sets(
        &self,
        s: &Session,
        fence: Option<(&str, i32)>,
        sets: &[(u32, i64)],
        value: &Set,
    ) -> Result<u64, Failure> {
        let data = serde_json::to_vec(value)?;
        let writes: Vec<(String, Write)> = sets
            .iter()
            .filter_map(|&(set, g)| Some((self.set_path(set), write_at(g)?)))
            .collect();
        let mut done = 0;
        for chunk in writes.chunks(PER_MULTI) {
            if self.commit(s, fence, chunk, &data).await? {
                done += chunk.len() as u64;
                continue;
            }
            if chunk.len() == 1 {
                continue;
            }
            for write in chunk {
                if self
                    .commit(s, fence, std::slice::from_ref(write), &data)
                    .await?
                {
                    done += 1;
                }
            }
        }
        Ok(done)
    }

    /// One multi: the fence's check, then the writes. `false` when a compare lost.
    async fn commit(
        &self,
        s: &Session,
        fence: Option<(&str, i32)>,
        writes: &[(String, Write)],
        data: &[u8],
    ) -> Result<bool, Failure> {
        let path = writes
            .first()
            .map_or(self.prefix.as_str(), |w| w.0.as_str());
        let op_failed = |cause| Failure::Op {
            op: "write",
            path: path.to_owned(),
            cause,
        };
        let options = CreateMode::Persistent.with_acls(s.acls);
        let mut multi = s.client.new_multi_writer();
        if let Some((member, version)) = fence {
            multi
                .add_check_version(member, version)
                .map_err(op_failed)?;
        }
        for (set, write) in writes {
            match *write {
                Write::Create => multi.add_create(set, data, &options),
                Write::At(version) => multi.add_set_data(set, data, Some(version)),
            }
            .map_err(op_failed)?;
        }
        let result = Self::bounded(s, "write", path, multi.commit()).await?;
        let f = match result {
            Ok(_) => return Ok(true),
            Err(MultiWriteError::OperationFailed { source, .. })
            | Err(MultiWriteError::RequestFailed { source }) => op_failed(source),
        };
        if f.lost_race() {
            return Ok(false);
        }
        self.forget_if_lost(s, &f);
        Err(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generation_is_the_version_plus_one_and_maps_back_to_the_write() {
        assert_eq!(generation(None), 0);
        assert_eq!(generation(Some(0)), 1);
        assert_eq!(generation(Some(41)), 42);
        assert_eq!(write_at(0), Some(Write::Create));
        assert_eq!(write_at(1), Some(Write::At(0)));
        assert_eq!(write_at(42), Some(Write::At(41)));
        assert_eq!(
            write_at(generation(Some(i32::MAX))),
            Some(Write::At(i32::MAX))
        );
        assert_eq!(write_at(i64::from(i32::MAX) + 2), None);
        assert_eq!(write_at(-1), None);
    }
}
