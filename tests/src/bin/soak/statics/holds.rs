//! The static group's hold faults (issue 46): the alias pair — Leaf's ID space under two names
//! on one machine ID, its leaf slot's state file reached through a symlink — and a deleted
//! hold: every file of the hold directory and every state file's `.lock` deleted, in turn at
//! any moment and while a run of the group issues, with a second run on the same machine ID
//! (in the same ID space: an alias under its other name) started right after. Nothing a tidy-up deletes may let two runs issue at once: the kernel
//! holds the machine ID, so the second run waits its turn, and its IDs go into the check.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use vesta_tests::soak::rng::Rng;

use super::{ALIAS_MACHINE, BurstRun, Statics, prepare, spawn_into};
use crate::Ctx;
use crate::producers::{Output, Role, Slot};

/// IDs of the run started right after a deletion.
const PARTNER_IDS: u64 = 20_000;
/// IDs of a run of the group started for a deletion while it issues (about half a second of
/// max-peak's rate, flat out).
const TARGET_IDS: u64 = 500_000;

/// The alias pair's slots — `layout = "leaf"` on its own state file through a symlink,
/// `layout = "twitter"` on the user's own — and the symlink with the file it names.
pub(super) fn alias_pair(
    ctx: &Ctx,
    rng: &mut Rng,
) -> anyhow::Result<(Vec<Slot>, (PathBuf, PathBuf))> {
    let dir = ctx.dir.join("alias");
    fs::create_dir_all(&dir)?;
    let real = dir.join(format!("m-{ALIAS_MACHINE}.state"));
    let link = ctx.dir.join(format!("alias-{ALIAS_MACHINE}.link"));
    std::os::unix::fs::symlink(&real, &link)?;
    let mut slots = Vec::new();
    for layout in ["leaf", "twitter"] {
        let state = if layout == "leaf" {
            format!("state_file = {:?}\n", link.display().to_string())
        } else {
            String::new()
        };
        let conf = ctx.dir.join(format!("alias-{layout}.toml"));
        fs::write(
            &conf,
            format!("[id]\nlayout = \"{layout}\"\n\n[machine]\nid = {ALIAS_MACHINE}\n{state}"),
        )?;
        slots.push(Slot::new(
            format!("alias-{layout}"),
            Role::AliasGen {
                layout,
                machine: ALIAS_MACHINE,
                conf,
            },
            rng.next_u64(),
        ));
    }
    Ok((slots, (link, real)))
}

impl Statics {
    /// The fault: the hold deleted. In turn: while a run of a static or alias slot issues
    /// (started now if none goes), with a second run on its machine ID — in its ID space, on
    /// another user's own state file — started right after, which must wait its turn; or at
    /// any moment (whatever of the group runs). False without a target for the first kind.
    pub fn delete_hold(
        &mut self,
        ctx: &mut Ctx,
        slots: &mut [Slot],
        outputs: &mut Vec<Output>,
        rng: &mut Rng,
    ) -> bool {
        let group: Vec<usize> = self
            .files
            .iter()
            .map(|f| f.slot)
            .chain(self.aliases.iter().copied())
            .collect();
        if group.is_empty() {
            return false;
        }
        if !self.holds_deleted.is_multiple_of(2) {
            let going = group.iter().filter(|&&i| slots[i].running()).count();
            let n = self.delete_hold_files(ctx);
            self.holds_deleted += 1;
            ctx.event(format!(
                "deleted the hold: {n} files (the hold directory's records, every state file's \
                 .lock), {going} runs of the group going"
            ));
            self.check_links(ctx);
            return true;
        }
        let free: Vec<usize> = group.into_iter().filter(|&i| !self.busy(i)).collect();
        if free.is_empty() {
            return false;
        }
        let i = free[rng.index(free.len())];
        if !slots[i].running() {
            self.before_spawn(i);
            slots[i].spawn(ctx, outputs, TARGET_IDS, 1e9);
        }
        // Once it writes IDs it holds the machine ID.
        let until = Instant::now() + Duration::from_secs(10);
        while slots[i].alive() && slots[i].output_len(outputs) == 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        let n = self.delete_hold_files(ctx);
        let going = slots[i].alive();
        self.holds_deleted += 1;
        if going {
            self.holds_deleted_running += 1;
        }
        let role = slots[i].role.clone();
        let mut cmd = Command::new(&ctx.vesta);
        cmd.arg("gen");
        match &role {
            Role::StaticGen { id_type, .. } => {
                let f = self.files.iter().find(|f| f.slot == i).expect("its file");
                cmd.args(["--machine", &f.machine.to_string()])
                    .args(["--type", &id_type.to_string()]);
            }
            Role::AliasGen {
                layout, machine, ..
            } => {
                // The space's other name.
                let other = if *layout == "leaf" { "twitter" } else { "leaf" };
                cmd.args(["--layout", other, "--machine", &machine.to_string()]);
            }
            _ => unreachable!("a slot of the group"),
        }
        cmd.args(["-n", &PARTNER_IDS.to_string()]);
        prepare(&mut cmd, ctx, 1);
        self.hold_partners += 1;
        let label = format!("after-hold-deleted.{}", self.hold_partners);
        if let Some(proc) = spawn_into(ctx, outputs, &label, cmd, role) {
            self.bursts.push(BurstRun { slot: i, proc });
        }
        ctx.event(format!(
            "deleted the hold: {n} files, while {} {}; {label} started on its machine ID",
            slots[i].name,
            if going { "issued" } else { "had just ended" },
        ));
        self.check_links(ctx);
        true
    }

    /// Deletes every file of the hold directory and every `.lock` beside a state file of the
    /// group (the slots', the alias pair's, the users' own); returns how many.
    fn delete_hold_files(&mut self, ctx: &mut Ctx) -> u64 {
        let mut n = 0;
        let dirs = [
            (ctx.dir.join("hold"), true),
            (ctx.dir.clone(), false),
            (ctx.dir.join("alias"), false),
            (ctx.dir.join("users/user-0/vesta"), false),
            (ctx.dir.join("users/user-1/vesta"), false),
        ];
        for (dir, all) in dirs {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for path in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
                let lock = path.extension().is_some_and(|x| x == "lock");
                if path.is_file() && (all || lock) {
                    match fs::remove_file(&path) {
                        Ok(()) => n += 1,
                        Err(e) => ctx.event(format!("cannot delete {}: {e}", path.display())),
                    }
                }
            }
        }
        self.hold_files_deleted += n;
        n
    }

    /// A finding for each state file's symlink that is no longer one (a rewrite replaced it).
    pub(super) fn check_links(&mut self, ctx: &mut Ctx) {
        let broken: Vec<PathBuf> = self
            .links
            .iter()
            .filter(|(link, _)| !self.links_broken.contains(link))
            .filter(|(link, real)| {
                let is_link = fs::symlink_metadata(link).is_ok_and(|m| m.file_type().is_symlink());
                !is_link || fs::read_link(link).ok().as_ref() != Some(real)
            })
            .map(|(link, _)| link.clone())
            .collect();
        for link in broken {
            ctx.finding(format!(
                "{} is no longer a symlink to its state file",
                link.display()
            ));
            self.links_broken.push(link);
        }
    }

    /// The report's part of the alias pair, the symlinks and the deleted holds.
    pub(super) fn holds_report(&self) -> String {
        format!(
            "; alias pair (leaf, twitter) on machine {ALIAS_MACHINE}: {} slots; {} state files \
             through symlinks, {} no longer symlinks; {} holds deleted ({} while a run of the \
             group issued), {} files in all, {} runs started right after",
            self.aliases.len(),
            self.links.len(),
            self.links_broken.len(),
            self.holds_deleted,
            self.holds_deleted_running,
            self.hold_files_deleted,
            self.hold_partners
        )
    }
}
