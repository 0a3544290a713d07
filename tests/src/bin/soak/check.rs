//! The end of the soak: every ID file checked on disk for duplicates (an external merge sort,
//! `vesta_tests::soak::check`), every ID's fields checked against its writer (genMethod, pool,
//! layout; Leaf's sign bit and worker field for the alias pair), and, if any ID was handed out
//! twice, the evidence: where each copy is and what `vesta explain` says about it.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::io;
use std::path::Path;
use std::process::Command;

use vesta_core::{Epoch, GenMethod, IdFields, IdType, MachinePools, Preset};
use vesta_tests::soak::check::{IdFile, Outcome, find_duplicates, locate};

use crate::producers::{Output, Role};

/// Duplicated IDs explained in the evidence file.
const EXPLAINED: usize = 20;

/// What the IDs of one class of producer look like.
#[derive(Debug)]
pub struct ClassStats {
    /// IDs read.
    pub ids: u64,
    /// Machine IDs seen.
    machines: Vec<bool>,
    /// IDs whose genMethod, pool, type or version is not its writer's.
    pub wrong: u64,
    /// Earliest unit start, ms since 1970.
    pub earliest_ms: u64,
    /// Latest unit start, ms since 1970.
    pub latest_ms: u64,
    /// IDs of units that started more than a second before the soak: issued on a clock
    /// stepped back (on a machine ID whose mark allowed it).
    pub before_start: u64,
}

impl Default for ClassStats {
    fn default() -> Self {
        ClassStats {
            ids: 0,
            machines: vec![false; 1024],
            wrong: 0,
            earliest_ms: u64::MAX,
            latest_ms: 0,
            before_start: 0,
        }
    }
}

impl ClassStats {
    /// How many distinct machine IDs issued these IDs.
    pub fn machine_count(&self) -> usize {
        self.machines.iter().filter(|m| **m).count()
    }
}

/// The result of the check.
#[derive(Debug)]
pub struct Checked {
    /// The duplicate count and per-file reading stats.
    pub outcome: Outcome,
    /// Per class (`embed`, `embed-sql`, `embed-etcd`, `tcp`, `rest`, `static`).
    pub classes: BTreeMap<&'static str, ClassStats>,
}

/// Reads every output once: duplicates on disk, fields against the writer.
pub fn check(outputs: &[Output], tmp: &Path, run_len: usize, start_ms: u64) -> io::Result<Checked> {
    let files: Vec<IdFile> = outputs.iter().map(|o| o.file.clone()).collect();
    let mut classes: BTreeMap<&'static str, ClassStats> = BTreeMap::new();
    let server_start = MachinePools::DEFAULT_SERVER_START;
    let leaf = Preset::Leaf.layout();
    let outcome = find_duplicates(&files, tmp, run_len, |i, id| {
        let role = &outputs[i].role;
        let c = classes.entry(role.class()).or_default();
        c.ids += 1;
        let ms = if let Role::AliasGen { machine, .. } = role {
            // Leaf's space (the alias pair): its sign bit clear and its worker field the
            // pair's machine ID. Its IDs cannot equal a Vesta ID of these decades: read as
            // Vesta's, their time is after 2040.
            let node = leaf.node_span().get(id);
            c.machines[node as usize] = true;
            if node != *machine || id & !leaf.used_bits() != 0 {
                c.wrong += 1;
            }
            leaf.unix_ms_of(leaf.time_span().get(id))
        } else {
            let f = IdFields::decode(id);
            c.machines[f.machine as usize] = true;
            let method = role.gen_method();
            let pool_ok = (method == GenMethod::Embed) == (f.machine < server_start);
            let type_ok = match role {
                Role::Embed(t, _, _) | Role::StaticGen { id_type: t, .. } => f.id_type == *t,
                _ => f.id_type == IdType::MaxPeak,
            };
            if f.gen_method != method || !pool_ok || !type_ok || f.version != role.version() {
                c.wrong += 1;
            }
            f.unix_ms(Epoch::VESTA)
        };
        c.earliest_ms = c.earliest_ms.min(ms);
        c.latest_ms = c.latest_ms.max(ms);
        if ms + 1000 < start_ms {
            c.before_start += 1;
        }
    })?;
    Ok(Checked { outcome, classes })
}

/// Where the first duplicated IDs were found and what they are; written to `path`, returned.
pub fn evidence(outputs: &[Output], examples: &[u64], vesta: &Path, path: &Path) -> String {
    let files: Vec<IdFile> = outputs.iter().map(|o| o.file.clone()).collect();
    let wanted: HashSet<u64> = examples.iter().take(EXPLAINED).copied().collect();
    let mut text = String::new();
    match locate(&files, &wanted) {
        Ok(found) => {
            for &id in examples.iter().take(EXPLAINED) {
                let _ = writeln!(text, "ID {id} handed out by:");
                for (_, f, pos) in found.iter().filter(|(i, ..)| *i == id) {
                    let _ = writeln!(
                        text,
                        "  {} (ID number {pos} in {})",
                        files[*f].process,
                        files[*f].path.display()
                    );
                }
                match Command::new(vesta)
                    .args(["explain", &id.to_string()])
                    .output()
                {
                    Ok(out) => text.push_str(&String::from_utf8_lossy(&out.stdout)),
                    Err(e) => {
                        let _ = writeln!(text, "  (vesta explain failed: {e})");
                    }
                }
            }
        }
        Err(e) => {
            let _ = writeln!(text, "locating the duplicates failed: {e}");
        }
    }
    if let Err(e) = std::fs::write(path, &text) {
        let _ = writeln!(text, "(could not write {}: {e})", path.display());
    }
    text
}
