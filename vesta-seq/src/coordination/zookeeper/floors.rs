//! The restore guard's floors in ZooKeeper: `<prefix>/floors/<kind>-<section>`, PERSISTENT,
//! the highest raise of the section as decimal text. Raised by `create` (absent) or `setData`
//! at the version read, never lowered; a member that takes a set from another host reads them
//! at each section load, so a restore of the database is seen whichever member raised it.

use zookeeper_client::{CreateMode, Error as ZkError};

use super::ZkCoordinator;
use super::session::Failure;

/// Tries of a raise that lost a compare to another writer.
const TRIES: usize = 5;

impl ZkCoordinator {
    fn floor_path(&self, kind: i16, section: i64) -> String {
        format!("{}/{kind}-{section}", self.floors_dir())
    }

    /// The floor and its znode's version (`None`: no znode).
    async fn floor_read(&self, kind: i16, section: i64) -> Result<Option<(u64, i32)>, Failure> {
        let s = self.any_session().await?;
        let path = self.floor_path(kind, section);
        match Self::call(&s, "get", &path, s.client.get_data(&path)).await {
            Ok((data, stat)) => Ok(Some((
                std::str::from_utf8(&data)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                    .unwrap_or(0),
                stat.version,
            ))),
            Err(Failure::Op {
                cause: ZkError::NoNode,
                ..
            }) => Ok(None),
            Err(f) => {
                self.forget_if_lost(&s, &f);
                Err(f)
            }
        }
    }

    pub(super) async fn floor_inner(
        &self,
        kind: i16,
        section: i64,
    ) -> Result<Option<u64>, Failure> {
        Ok(self.floor_read(kind, section).await?.map(|(max, _)| max))
    }

    pub(super) async fn raise_floor_inner(
        &self,
        kind: i16,
        section: i64,
        max: u64,
    ) -> Result<(), Failure> {
        let path = self.floor_path(kind, section);
        let data = max.to_string();
        for _ in 0..TRIES {
            let s = self.any_session().await?;
            let written = match self.floor_read(kind, section).await? {
                Some((have, _)) if have >= max => return Ok(()),
                Some((_, version)) => Self::call(
                    &s,
                    "set",
                    &path,
                    s.client.set_data(&path, data.as_bytes(), Some(version)),
                )
                .await
                .map(|_| ()),
                None => {
                    let options = CreateMode::Persistent.with_acls(s.acls);
                    Self::call(
                        &s,
                        "create",
                        &path,
                        s.client.create(&path, data.as_bytes(), &options),
                    )
                    .await
                    .map(|_| ())
                }
            };
            match written {
                Ok(()) => return Ok(()),
                Err(f) if f.lost_race() => continue,
                Err(f) => {
                    self.forget_if_lost(&s, &f);
                    return Err(f);
                }
            }
        }
        Err(Failure::Op {
            op: "raise",
            path,
            cause: ZkError::BadVersion,
        })
    }

    pub(super) async fn floors_inner(&self) -> Result<Vec<((i16, i64), u64)>, Failure> {
        let s = self.any_session().await?;
        let dir = self.floors_dir();
        let names = match Self::call(&s, "list", &dir, s.client.list_children(&dir)).await {
            Ok(names) => names,
            Err(Failure::Op {
                cause: ZkError::NoNode,
                ..
            }) => return Ok(Vec::new()),
            Err(f) => return Err(f),
        };
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let Some((kind, section)) = name
                .split_once('-')
                .and_then(|(k, s)| Some((k.parse().ok()?, s.parse().ok()?)))
            else {
                continue;
            };
            if let Some(max) = self.floor_inner(kind, section).await? {
                out.push(((kind, section), max));
            }
        }
        Ok(out)
    }
}
