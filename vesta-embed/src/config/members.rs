//! An issuer of k machine IDs (`machine.ids`): which IDs, decided with the rest of the machine
//! plan, and the plan of each ID alone ([`MachinePlan::members`]), so every machine ID is
//! started, leased, marked, held and fenced exactly as a lone one is. A fixed plan's IDs are a
//! run of the pool (`id`..=`id + ids - 1`; a StatefulSet pod's from ordinal × ids + offset);
//! a registry leases `ids` IDs, one lease each. Refused in one line where the pool cannot hold
//! them.
//!
//! Each machine ID keeps its own state file: the first the configured path, each further one
//! a file beside it named after it ([`member_state_file`]), so adding IDs to a running issuer
//! keeps the first one's mark.

use std::ops::RangeInclusive;
#[cfg(feature = "state-file")]
use std::path::{Path, PathBuf};

use super::ConfigError;
use super::plan::{Keeper, MachineChoice, MachinePlan};

/// The most machine IDs one issuer holds: each leased one has a lease thread and a store
/// session of its own.
pub const MAX_IDS: u64 = 256;

/// `machine.ids`, checked: at least 1, at most [`MAX_IDS`] and what the pool holds.
pub(super) fn check_ids(
    ids: u64,
    pool_name: &str,
    pool: &RangeInclusive<u64>,
) -> Result<u64, ConfigError> {
    let size = pool.end() - pool.start() + 1;
    let max = size.min(MAX_IDS);
    if (1..=max).contains(&ids) {
        return Ok(ids);
    }
    Err(ConfigError::Inconsistent(if ids > size {
        format!(
            "machine.ids {ids} is more than the {pool_name} pool {}..={} holds ({size} machine \
             IDs): allowed 1..={max}",
            pool.start(),
            pool.end()
        )
    } else {
        format!("machine.ids {ids} is out of range: allowed 1..={max}")
    }))
}

/// A fixed plan's run of `ids` machine IDs from `first` lies in the pool. The first ID alone is
/// checked where a lone one is (its generator's config), with the same words.
pub(super) fn check_fixed_run(
    first: u64,
    ids: u64,
    pool_name: &str,
    pool: &RangeInclusive<u64>,
) -> Result<(), ConfigError> {
    if ids == 1 || !pool.contains(&first) {
        return Ok(());
    }
    let last = first.saturating_add(ids - 1);
    if last <= *pool.end() {
        return Ok(());
    }
    Err(ConfigError::Inconsistent(format!(
        "machine.ids {ids} from machine {first} needs {first}..={last}, past the {pool_name} pool \
         {}..={}: at most {} from {first}",
        pool.start(),
        pool.end(),
        pool.end() - first + 1
    )))
}

/// The first machine ID of a StatefulSet pod named `host` holding `ids` IDs: ordinal × ids +
/// `offset`, so pods take disjoint runs.
pub(super) fn ordinal_first(host: &str, ids: u64, offset: u64) -> Result<u64, ConfigError> {
    let ordinal = super::plan::host_ordinal(host)?;
    ordinal
        .checked_mul(ids)
        .and_then(|first| first.checked_add(offset))
        .ok_or_else(|| {
            ConfigError::Inconsistent(format!(
                "machine.source = \"ordinal\": ordinal {ordinal} × machine.ids {ids} + \
                 machine.ordinal_offset {offset} overflows"
            ))
        })
}

impl MachinePlan {
    /// The machine IDs a fixed plan uses, `fixed()..=fixed() + ids - 1`; `None` when leased.
    pub fn fixed_range(&self) -> Option<RangeInclusive<u64>> {
        self.fixed().map(|first| first..=first + (self.ids - 1))
    }

    /// The plan of each machine ID alone, in slot order (`ids` of them, each of one ID): its
    /// fixed ID (the run's `slot`-th) or a lease of its own, its own state file
    /// (`member_state_file`), and the same registry, pool and host hold. One plan, itself,
    /// when `ids` is 1.
    pub fn members(&self) -> Vec<MachinePlan> {
        if self.ids == 1 {
            return vec![self.clone()];
        }
        (0..self.ids)
            .map(|slot| {
                let choice = match &self.choice {
                    MachineChoice::Fixed { machine, from } => MachineChoice::Fixed {
                        machine: machine + slot,
                        from: from.clone(),
                    },
                    MachineChoice::Leased => MachineChoice::Leased,
                };
                let fixed = self.fixed();
                MachinePlan {
                    choice,
                    pool_name: self.pool_name,
                    pool: self.pool.clone(),
                    keeper: self.keeper.for_member(slot, fixed),
                    host_hold: self.host_hold,
                    ids: 1,
                }
            })
            .collect()
    }
}

impl Keeper {
    /// This keeper for the `slot`-th machine ID of a plan whose fixed run starts at `first`
    /// (`None`: leased): that ID registered, or a lease of its own; its own state file.
    #[cfg_attr(
        not(any(
            feature = "state-file",
            feature = "zookeeper",
            feature = "sql",
            feature = "etcd"
        )),
        allow(unused_variables)
    )]
    fn for_member(&self, slot: u64, first: Option<u64>) -> Keeper {
        let machine = first.map(|f| f + slot);
        match self {
            Keeper::Nothing => Keeper::Nothing,
            #[cfg(feature = "state-file")]
            Keeper::StateFile(path) => {
                Keeper::StateFile(member_state_file(path, slot, machine, first))
            }
            #[cfg(feature = "zookeeper")]
            Keeper::ZooKeeper(s) => {
                let mut s = s.clone();
                s.fixed = machine;
                s.state_file = s
                    .state_file
                    .map(|path| member_state_file(&path, slot, machine, first));
                Keeper::ZooKeeper(s)
            }
            #[cfg(feature = "sql")]
            Keeper::Sql(s) => {
                let mut s = s.clone();
                s.fixed = machine;
                Keeper::Sql(s)
            }
            #[cfg(feature = "etcd")]
            Keeper::Etcd(s) => {
                let mut s = s.clone();
                s.fixed = machine;
                Keeper::Etcd(s)
            }
        }
    }
}

/// The state file of the `slot`-th machine ID of an issuer whose `machine.state_file` is
/// `path`: slot 0 keeps `path` itself (so a deployment that adds IDs keeps its first one's
/// mark); a further fixed ID `machine` is named after it, `.m<machine>` before the extension
/// (`vesta.state` → `vesta.m931.state`; a name already ending in the first ID's `.m<first>`,
/// as `vesta gen`'s own files do, has it replaced: `space-….m930.state` →
/// `space-….m931.state`, the file a run of 931 alone keeps); a further leased one (its ID
/// known only once claimed) after its slot, `vesta.slot1.state`.
#[cfg(feature = "state-file")]
pub(crate) fn member_state_file(
    path: &Path,
    slot: u64,
    machine: Option<u64>,
    first: Option<u64>,
) -> PathBuf {
    if slot == 0 {
        return path.to_path_buf();
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stem, ext) = match name.rfind('.') {
        Some(dot) if dot > 0 => (&name[..dot], &name[dot..]),
        _ => (name.as_str(), ""),
    };
    let (stem, tag) = match (machine, first) {
        (Some(machine), Some(first)) => {
            let own = format!(".m{first}");
            (
                stem.strip_suffix(&own).unwrap_or(stem),
                format!("m{machine}"),
            )
        }
        _ => (stem, format!("slot{slot}")),
    };
    path.with_file_name(format!("{stem}.{tag}{ext}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{IssuerConfig, MachineSection, MachineSource};
    use vesta_core::GenMethod;

    /// A server's plan of `machine`.
    fn server(machine: MachineSection) -> Result<MachinePlan, ConfigError> {
        IssuerConfig {
            machine,
            gen_method: GenMethod::Server,
            ..IssuerConfig::default()
        }
        .plan()
    }

    fn fixed(id: u64, ids: u64) -> MachineSection {
        MachineSection {
            id: Some(id),
            ids,
            ..MachineSection::default()
        }
    }

    #[cfg(feature = "sql")]
    fn leased(ids: u64) -> MachineSection {
        MachineSection {
            source: MachineSource::Sql,
            db: Some("sqlite:///tmp/vesta-members.db".into()),
            ids,
            ..MachineSection::default()
        }
    }

    #[test]
    fn a_static_run_lies_in_the_pool_and_each_member_is_one_id_of_it() {
        let plan = server(fixed(930, 4)).unwrap();
        assert_eq!(plan.fixed_range(), Some(930..=933));
        let members = plan.members();
        let ids: Vec<_> = members.iter().map(|m| m.fixed()).collect();
        assert_eq!(ids, [Some(930), Some(931), Some(932), Some(933)]);
        assert!(members.iter().all(|m| m.ids == 1));
        assert_eq!(
            plan.to_string(),
            "static, 4 machine IDs 930..=933, not registered anywhere"
        );
        let err = server(fixed(1022, 4)).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid config: machine.ids 4 from machine 1022 needs 1022..=1025, past the server \
             pool 924..=1023: at most 2 from 1022"
        );
        assert!(server(fixed(1020, 4)).is_ok());
        let err = server(fixed(930, 0)).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid config: machine.ids 0 is out of range: allowed 1..=100"
        );
    }

    #[test]
    #[cfg(feature = "sql")]
    fn ids_are_refused_naming_the_pool_where_it_cannot_hold_them() {
        let err = server(leased(101)).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid config: machine.ids 101 is more than the server pool 924..=1023 holds (100 \
             machine IDs): allowed 1..=100"
        );
        let leased = server(leased(100)).unwrap();
        assert_eq!(leased.members().len(), 100);
        assert!(leased.members().iter().all(|m| m.fixed().is_none()));
        assert!(
            leased
                .to_string()
                .starts_with("100 machine IDs leased from")
        );
    }

    #[test]
    fn an_ordinal_takes_a_run_of_its_own() {
        assert_eq!(ordinal_first("vesta-0", 4, 924).unwrap(), 924);
        assert_eq!(ordinal_first("vesta-2", 4, 924).unwrap(), 932);
        assert_eq!(ordinal_first("vesta-2", 1, 924).unwrap(), 926);
        let err = ordinal_first("vesta-5", u64::MAX, 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("overflows"), "{err}");
    }

    #[test]
    #[cfg(feature = "state-file")]
    fn each_machine_id_keeps_a_state_file_of_its_own() {
        let p = Path::new("/var/lib/vesta/vesta.state");
        assert_eq!(member_state_file(p, 0, Some(930), Some(930)), p);
        assert_eq!(
            member_state_file(p, 1, Some(931), Some(930)),
            Path::new("/var/lib/vesta/vesta.m931.state")
        );
        assert_eq!(
            member_state_file(Path::new("/s/space-ab.m930.state"), 2, Some(932), Some(930)),
            Path::new("/s/space-ab.m932.state"),
            "the state file name `gen` gives 932 alone"
        );
        assert_eq!(
            member_state_file(Path::new("/s/vesta-state"), 1, Some(8), Some(7)),
            Path::new("/s/vesta-state.m8")
        );
        assert_eq!(
            member_state_file(p, 3, None, None),
            Path::new("/var/lib/vesta/vesta.slot3.state")
        );
        let plan = server(MachineSection {
            state_file: Some("/v/x.state".into()),
            ..fixed(930, 2)
        })
        .unwrap();
        let files: Vec<_> = plan
            .members()
            .into_iter()
            .map(|m| match m.keeper {
                Keeper::StateFile(p) => p,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            files,
            [PathBuf::from("/v/x.state"), "/v/x.m931.state".into()]
        );
        assert!(plan.host_hold && plan.members().iter().all(|m| m.host_hold));
    }
}
