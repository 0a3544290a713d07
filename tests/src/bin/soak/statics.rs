//! The static group: `vesta gen` runs on static machine IDs with state files, and operators'
//! mistakes as its faults (issue 30). Each slot runs `vesta gen --config m-N.toml` in paced
//! chunks (machine 920 + N of the embed pool, far above the IDs the leasing workers claim, lowest
//! free first; version bit 0; slot 1 max-peak, slot 2 min-granularity, and so on). The soak keeps
//! copies of each state file — the record before each run, and one taken while a run issues —
//! and its faults are:
//!
//! - **an older copy copied back** ([`Statics::restore`]): a copy other than the file's current
//!   record overwrites it before the next run, in turn with the slot idle and after a crash (a
//!   run SIGKILLed while it issues);
//! - **an epoch flip** ([`Statics::flip`]): `vesta gen` on the slot's state file under another
//!   epoch — `--epoch` three seconds after Vesta's (its IDs would equal the slot's of three
//!   seconds before) or a config with `Z` written for `+08:00` — which must be refused, naming
//!   the mark and `vesta machine retire --state-file`; refusals are counted, anything else is a
//!   finding, and whatever it printed goes into the duplicate check;
//! - **parallel runs** ([`Statics::burst`]): four `vesta gen` runs at once on the slot's machine
//!   ID, three on its state file and one on a user's own state file (two users in turn), as
//!   `xargs -P4` runs them: they take turns on the file's lock and the host's hold;
//! - **a deleted hold** (`holds`, issue 46): every file of the hold directory (the host's
//!   records) and every state file's `.lock` deleted, in turn while a run of the group issues
//!   (a second run on the same machine ID, on another user's state file, started right after:
//!   the kernel still holds the ID, so it waits its turn) and at any moment.
//!
//! Beside the slots, an **alias pair** (issue 46): one slot runs `vesta gen` with `layout =
//! "leaf"`, one with `layout = "twitter"`, both on machine [`ALIAS_MACHINE`] — one ID space
//! under two names, which hold it in turns. The leaf slot's state file, and the second static
//! slot's, are reached through a **symlink**, which must still be one at the end.
//!
//! Every run writes its IDs to a file of the check. The host holds live in the work dir
//! (`VESTA_HOLD_DIR`), so a soak never meets another program's holds.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use vesta_core::IdType;
use vesta_tests::soak::check::{Format, IdFile};
use vesta_tests::soak::child::Proc;
use vesta_tests::soak::rng::Rng;

use crate::Ctx;
use crate::producers::{Output, Role, Slot};

mod holds;

/// The first machine ID of the group (slot N uses this + N).
pub const FIRST_MACHINE: u64 = 920;
/// Copies kept per state file and kind, clean or running (the oldest of its kind dropped first).
const KEPT: usize = 8;
/// How long a flip may take: `vesta gen` waits at most 10 s for a hold.
const FLIP_TIMEOUT: Duration = Duration::from_secs(20);
/// Runs in a burst.
const BURST: usize = 4;
/// The alias pair's machine ID (Leaf's worker field, which no other slot uses).
pub const ALIAS_MACHINE: u64 = 930;

/// One slot's state file and what happened to it.
struct StateFile {
    /// The slot's index among all slots.
    slot: usize,
    id_type: IdType,
    machine: u64,
    conf: PathBuf,
    /// The same config with `epoch = "2015-01-01T00:00:00Z"`.
    z_conf: PathBuf,
    path: PathBuf,
    copies: Vec<Vec<u8>>,
    /// The incarnation whose mid-run copy was taken.
    copied_during: u32,
}

/// A burst's run still going.
struct BurstRun {
    slot: usize,
    proc: Proc,
}

/// The static group's state files, bursts and counts.
pub struct Statics {
    files: Vec<StateFile>,
    bursts: Vec<BurstRun>,
    flips: u64,
    /// Flips refused as promised.
    refused: u64,
    restores: u64,
    restored_clean: u64,
    restored_after_kill: u64,
    bursts_started: u64,
    burst_runs: u64,
    burst_failed: u64,
    /// The alias pair's slots (leaf, twitter).
    aliases: Vec<usize>,
    /// The state files reached through a symlink: the link and the file it names.
    links: Vec<(PathBuf, PathBuf)>,
    /// Links found no longer a symlink (each once).
    links_broken: Vec<PathBuf>,
    /// Deleted holds: at any moment, and while a run of the group issued.
    holds_deleted: u64,
    holds_deleted_running: u64,
    /// Files deleted in all.
    hold_files_deleted: u64,
    /// Runs started right after a deletion, and how many of them failed.
    hold_partners: u64,
}

/// Runs a `vesta` process of the group on the work dir's host holds, as user `user`.
pub fn prepare(cmd: &mut Command, ctx: &Ctx, user: usize) {
    cmd.env("VESTA_HOLD_DIR", ctx.dir.join("hold"))
        .env("XDG_STATE_HOME", ctx.dir.join(format!("users/user-{user}")));
}

impl Statics {
    /// Writes the configs of `n` slots and of the alias pair (when `n` > 0) and returns the
    /// group with its slots (to be placed from `first_slot` on: the `n`, then the pair).
    pub fn new(
        ctx: &Ctx,
        n: usize,
        first_slot: usize,
        rng: &mut Rng,
    ) -> anyhow::Result<(Statics, Vec<Slot>)> {
        fs::create_dir_all(ctx.dir.join("hold"))?;
        for user in 0..2 {
            fs::create_dir_all(ctx.dir.join(format!("users/user-{user}")))?;
        }
        let mut files = Vec::new();
        let mut slots = Vec::new();
        let mut links = Vec::new();
        for i in 0..n {
            let id_type = if i % 2 == 0 {
                IdType::MaxPeak
            } else {
                IdType::MinGranularity
            };
            let machine = FIRST_MACHINE + i as u64;
            let path = ctx.dir.join(format!("m-{machine}.state"));
            // The second slot's config reaches its state file through a symlink.
            let named = if i == 1 {
                let link = ctx.dir.join(format!("m-{machine}.link"));
                std::os::unix::fs::symlink(&path, &link)?;
                links.push((link.clone(), path.clone()));
                link
            } else {
                path.clone()
            };
            let body = |epoch: &str| {
                format!(
                    "[id]\ntype = \"{id_type}\"\n{epoch}\n[machine]\nid = {machine}\n\
                     state_file = {:?}\n",
                    named.display().to_string()
                )
            };
            let conf = ctx.dir.join(format!("m-{machine}.toml"));
            let z_conf = ctx.dir.join(format!("m-{machine}-z.toml"));
            fs::write(&conf, body(""))?;
            fs::write(&z_conf, body("epoch = \"2015-01-01T00:00:00Z\"\n"))?;
            slots.push(Slot::new(
                format!("static-{}", i + 1),
                Role::StaticGen {
                    id_type,
                    conf: conf.clone(),
                },
                rng.next_u64(),
            ));
            files.push(StateFile {
                slot: first_slot + i,
                id_type,
                machine,
                conf,
                z_conf,
                path,
                copies: Vec::new(),
                copied_during: 0,
            });
        }
        let mut aliases = Vec::new();
        if n > 0 {
            let (pair, link) = holds::alias_pair(ctx, rng)?;
            aliases = (0..pair.len()).map(|i| first_slot + n + i).collect();
            slots.extend(pair);
            links.push(link);
        }
        let statics = Statics {
            files,
            bursts: Vec::new(),
            flips: 0,
            refused: 0,
            restores: 0,
            restored_clean: 0,
            restored_after_kill: 0,
            bursts_started: 0,
            burst_runs: 0,
            burst_failed: 0,
            aliases,
            links,
            links_broken: Vec::new(),
            holds_deleted: 0,
            holds_deleted_running: 0,
            hold_files_deleted: 0,
            hold_partners: 0,
        };
        Ok((statics, slots))
    }

    /// True while a burst runs on slot `slot`'s machine ID (its own run then waits).
    pub fn busy(&self, slot: usize) -> bool {
        self.bursts.iter().any(|b| b.slot == slot)
    }

    /// Before slot `slot` starts a run: a copy of its state file as it is (the record the
    /// run starts from).
    pub fn before_spawn(&mut self, slot: usize) {
        if let Some(f) = self.files.iter_mut().find(|f| f.slot == slot) {
            let _ = f.keep_copy();
        }
    }

    /// Takes a copy of each state file once per run while it runs (its first promise, once
    /// its start has written one: the file then differs from the copy taken before), and of
    /// every record a burst leaves; reaps bursts.
    pub fn tick(&mut self, ctx: &mut Ctx, slots: &[Slot]) {
        for f in &mut self.files {
            let slot = &slots[f.slot];
            if let Some(run) = &slot.run
                && f.copied_during != run.incarnation
                && f.keep_copy()
            {
                f.copied_during = run.incarnation;
            }
            if self.bursts.iter().any(|b| b.slot == f.slot) {
                let _ = f.keep_copy();
            }
        }
        let mut still = Vec::new();
        for mut b in std::mem::take(&mut self.bursts) {
            match b.proc.try_wait() {
                None => still.push(b),
                Some(status) if status.success() => {}
                Some(status) => {
                    self.burst_failed += 1;
                    ctx.finding(format!(
                        "{} (a run beside the slot's) exited with {status}: {}",
                        b.proc.name(),
                        b.proc.log_tail(2)
                    ));
                }
            }
        }
        self.bursts = still;
    }

    /// The fault: an older copy of a static slot's state file copied back before its next run.
    /// In turn: with the slot idle, an older clean record (a stop's); or after a crash — a run
    /// (going, or started now with 2M IDs) copied while it issues, after 1 to 100,000 IDs,
    /// then SIGKILLed — an older running record (a promise: of an earlier crash or a burst, as
    /// far as one was kept; the copy just taken is the file's record). False without a
    /// target: no slot free of bursts (idle, with a copy to restore, for the first).
    pub fn restore(
        &mut self,
        ctx: &mut Ctx,
        slots: &mut [Slot],
        outputs: &mut Vec<Output>,
        rng: &mut Rng,
    ) -> bool {
        let crash = !self.restores.is_multiple_of(2);
        let candidates: Vec<usize> = (0..self.files.len())
            .filter(|&i| {
                let f = &self.files[i];
                !self.busy(f.slot)
                    && (crash || (!slots[f.slot].running() && f.older().next().is_some()))
            })
            .collect();
        if candidates.is_empty() {
            return false;
        }
        let f = &mut self.files[candidates[rng.index(candidates.len())]];
        let slot = &mut slots[f.slot];
        if crash {
            if !slot.running() {
                let _ = f.keep_copy();
                slot.spawn(ctx, outputs, 2_000_000, 1e9);
            }
            let bytes = rng.range(1, 100_000) * Format::Text.bytes_per_id();
            let until = Instant::now() + Duration::from_secs(10);
            while slot.alive() && slot.output_len(outputs) < bytes && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = f.keep_copy();
            slot.kill(ctx);
        }
        // The kind this turn restores, as far as one was kept.
        let older: Vec<usize> = f.older().collect();
        let of_kind: Vec<usize> = older
            .iter()
            .copied()
            .filter(|&i| is_clean(&f.copies[i]) != crash)
            .collect();
        let pick = if of_kind.is_empty() { older } else { of_kind };
        if pick.is_empty() {
            return false;
        }
        let copy = pick[rng.index(pick.len())];
        let record = String::from_utf8_lossy(&f.copies[copy]).into_owned();
        if let Err(e) = fs::write(&f.path, &f.copies[copy]) {
            ctx.finding(format!("cannot copy back {}: {e}", f.path.display()));
            return false;
        }
        self.restores += 1;
        let clean = is_clean(record.as_bytes());
        if crash {
            self.restored_after_kill += 1;
        }
        if clean {
            self.restored_clean += 1;
        }
        let written = record
            .lines()
            .find_map(|l| l.strip_prefix("written_ms = "))
            .and_then(|ms| ms.parse().ok())
            .map_or_else(|| "?".into(), vesta_core::Epoch::rfc3339);
        ctx.event(format!(
            "copied back an older {} record of {} (written {written}){}",
            if clean { "clean" } else { "running" },
            f.path.display(),
            if crash {
                ", after SIGKILL of its run"
            } else {
                ""
            }
        ));
        true
    }

    /// The fault: `vesta gen` under another epoch on a static slot's state file, waited for;
    /// it must be refused. False without a target (every slot's run or burst going, or no
    /// state file yet).
    pub fn flip(
        &mut self,
        ctx: &mut Ctx,
        slots: &[Slot],
        outputs: &mut Vec<Output>,
        rng: &mut Rng,
    ) -> bool {
        let free = self.free(slots);
        let free: Vec<usize> = free
            .into_iter()
            .filter(|&i| self.files[i].path.exists())
            .collect();
        if free.is_empty() {
            return false;
        }
        let f = &self.files[free[rng.index(free.len())]];
        self.flips += 1;
        let label = format!("epoch-flip.{}", self.flips);
        let mut cmd = Command::new(&ctx.vesta);
        let how = if self.flips.is_multiple_of(2) {
            cmd.arg("gen").arg("--config").arg(&f.z_conf);
            "a config with epoch 2015-01-01T00:00:00Z"
        } else {
            // Three seconds after Vesta's epoch: its IDs would be the slot's of 3 s before.
            cmd.arg("gen")
                .arg("--config")
                .arg(&f.conf)
                .args(["--epoch", "1420041603000"]);
            "--epoch 1420041603000"
        };
        cmd.args(["-n", "100000"]);
        prepare(&mut cmd, ctx, 0);
        let (id_type, machine, conf) = (f.id_type, f.machine, f.conf.clone());
        let role = Role::StaticGen { id_type, conf };
        let Some(mut proc) = spawn_into(ctx, outputs, &label, cmd, role) else {
            return false;
        };
        let status = proc.wait_timeout(FLIP_TIMEOUT);
        if status.is_none() {
            proc.kill();
        }
        let log = fs::read_to_string(proc.log()).unwrap_or_default();
        let refused = status.is_some_and(|s| !s.success())
            && log.contains(&format!("machine {machine}'s mark in the state file"))
            && log.contains("vesta machine retire --state-file");
        if refused {
            self.refused += 1;
            ctx.event(format!("{label}: machine {machine} under {how}: refused"));
        } else {
            ctx.finding(format!(
                "{label}: machine {machine} under {how} was not refused as promised ({}); its \
                 log ends:\n{}",
                status.map_or_else(|| "still ran after 20 s".into(), |s| s.to_string()),
                proc.log_tail(4)
            ));
        }
        true
    }

    /// The fault: four `vesta gen -n COUNT` at once (COUNT 5,000 to 50,000) on a static
    /// slot's machine ID — three on its state file, one on a user's own (users taking turns).
    /// False without a target.
    pub fn burst(
        &mut self,
        ctx: &mut Ctx,
        slots: &[Slot],
        outputs: &mut Vec<Output>,
        rng: &mut Rng,
    ) -> bool {
        let free = self.free(slots);
        if free.is_empty() {
            return false;
        }
        let i = free[rng.index(free.len())];
        let count = rng.range(5_000, 50_000);
        let (slot, machine, id_type) = (
            self.files[i].slot,
            self.files[i].machine,
            self.files[i].id_type,
        );
        let conf = self.files[i].conf.clone();
        self.bursts_started += 1;
        for run in 0..BURST {
            self.burst_runs += 1;
            let label = format!("parallel-gen.{}", self.burst_runs);
            let mut cmd = Command::new(&ctx.vesta);
            cmd.arg("gen");
            let user = if run + 1 == BURST {
                cmd.args(["--machine", &machine.to_string()])
                    .args(["--type", &id_type.to_string()]);
                (self.bursts_started % 2) as usize
            } else {
                cmd.arg("--config").arg(&conf);
                0
            };
            cmd.args(["-n", &count.to_string()]);
            prepare(&mut cmd, ctx, user);
            let role = Role::StaticGen {
                id_type,
                conf: conf.clone(),
            };
            if let Some(proc) = spawn_into(ctx, outputs, &label, cmd, role) {
                self.bursts.push(BurstRun { slot, proc });
            }
        }
        ctx.event(format!(
            "{BURST} vesta gen runs at once on machine {machine} ({count} IDs each)"
        ));
        true
    }

    /// The state files (indices) whose slot neither runs nor has a burst going.
    fn free(&self, slots: &[Slot]) -> Vec<usize> {
        (0..self.files.len())
            .filter(|&i| !slots[self.files[i].slot].running() && !self.busy(self.files[i].slot))
            .collect()
    }

    /// At the end: waits (bounded) for bursts still going.
    pub fn finish(&mut self, ctx: &mut Ctx, slots: &[Slot]) {
        for b in &mut self.bursts {
            if b.proc.wait_timeout(Duration::from_secs(30)).is_none() {
                ctx.finding(format!("{} still ran at the end (killed)", b.proc.name()));
                b.proc.kill();
            }
        }
        self.tick(ctx, slots);
        self.check_links(ctx);
    }

    /// The group's lines of the report.
    pub fn report(&self) -> String {
        format!(
            "static group: {} state files; {} older copies copied back ({} clean records, {} \
             running; {} of them after SIGKILL of a run); {} epoch flips tried, {} refused; {} \
             parallel runs in bursts of {BURST}, {} failed",
            self.files.len(),
            self.restores,
            self.restored_clean,
            self.restores - self.restored_clean,
            self.restored_after_kill,
            self.flips,
            self.refused,
            self.burst_runs,
            self.burst_failed
        ) + &self.holds_report()
    }
}

impl StateFile {
    /// Keeps a copy of the file as it is now, unless it is missing or the latest copy already;
    /// true if it kept one.
    fn keep_copy(&mut self) -> bool {
        let Ok(now) = fs::read(&self.path) else {
            return false;
        };
        if self.copies.last() == Some(&now) {
            return false;
        }
        let clean = is_clean(&now);
        self.copies.push(now);
        let of_kind: Vec<usize> = (0..self.copies.len())
            .filter(|&i| is_clean(&self.copies[i]) == clean)
            .collect();
        if of_kind.len() > KEPT {
            self.copies.remove(of_kind[0]);
        }
        true
    }

    /// The copies other than the file's current record.
    fn older(&self) -> impl Iterator<Item = usize> + '_ {
        let now = fs::read(&self.path).ok();
        (0..self.copies.len()).filter(move |&i| now.as_ref() != Some(&self.copies[i]))
    }
}

/// True for a state file's clean record (a clean stop's), false for a running one (a promise).
fn is_clean(record: &[u8]) -> bool {
    String::from_utf8_lossy(record)
        .lines()
        .any(|l| l.trim() == "clean = true")
}

/// Spawns a `vesta gen` of the group whose IDs go to a new file of the check.
fn spawn_into(
    ctx: &mut Ctx,
    outputs: &mut Vec<Output>,
    label: &str,
    cmd: Command,
    role: Role,
) -> Option<Proc> {
    let path = ctx.data.join(format!("{label}.txt"));
    let log = ctx.logs.join(format!("{label}.log"));
    let file = match fs::File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            ctx.finding(format!("cannot create {}: {e}", path.display()));
            return None;
        }
    };
    match Proc::spawn(label, cmd, &log, Some(file), false, &ctx.pids) {
        Ok(proc) => {
            outputs.push(Output {
                file: IdFile {
                    path,
                    format: Format::Text,
                    process: label.to_owned(),
                },
                role,
            });
            Some(proc)
        }
        Err(e) => {
            ctx.finding(format!("{label} could not be spawned: {e}"));
            None
        }
    }
}
