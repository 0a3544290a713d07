//! The soak's end: the producers, servers and stores stopped (each bounded), the ID files and
//! the sequence calls checked, and the report printed and written; its exit status.

use super::*;

impl Soak {
    /// Stops the producers (bounded), then the servers, then ZooKeeper and the other stores.
    pub(crate) fn finish(&mut self) {
        // A store that is down comes back first, so the workers leasing there stop cleanly.
        self.stores.settle(&mut self.ctx);
        self.ctx.event("stopping the producers");
        for s in &mut self.slots {
            s.stop();
        }
        let until = Instant::now() + STOP_GRACE;
        while self.slots.iter().any(Slot::running) {
            if Instant::now() >= until {
                for s in &mut self.slots {
                    if let Some(run) = &mut s.run {
                        let what = format!(
                            "{} (pid {}) still ran {} s after it was told to stop (killed); its \
                             log ends:\n{}",
                            run.proc.name(),
                            run.proc.pid(),
                            STOP_GRACE.as_secs(),
                            run.proc.log_tail(12)
                        );
                        self.ctx.finding(what);
                        run.proc.kill();
                    }
                }
            }
            self.tick_servers();
            self.tick_zk();
            self.run_follow_ups();
            self.tick_producers(false, 0);
            thread::sleep(TICK);
        }
        self.statics.finish(&mut self.ctx, &self.slots);
        if let Some(seq) = &mut self.seq {
            self.ctx.event("stopping the sequence group");
            seq.finish(&mut self.ctx);
        }
        if let Some((i, handle)) = self.zk_restart.take() {
            let _ = handle.join();
            self.ctx
                .event(format!("ZooKeeper node {} restart finished", i + 1));
        }
        self.ctx.event("stopping the servers (SIGTERM)");
        for s in &mut self.tcp {
            s.retire(&mut self.ctx);
        }
        self.rest.retire(&mut self.ctx);
        let mut zk = self.zk.lock().unwrap_or_else(PoisonError::into_inner);
        for i in 0..3 {
            zk.kill(i);
        }
        drop(zk);
        self.stores.stop();
        self.ctx.event("every process stopped");
    }

    /// Checks every ID on disk and prints the report; the exit status says what it found.
    pub(crate) fn report(
        mut self,
        started_wall: u64,
        issuing: Duration,
        took: Duration,
    ) -> anyhow::Result<ExitCode> {
        self.ctx.event(format!(
            "checking {} ID files for duplicates on disk",
            self.outputs.len()
        ));
        let check_began = Instant::now();
        let tmp = self.ctx.dir.join("sort");
        let checked = check::check(&self.outputs, &tmp, self.args.run_len, started_wall)
            .context("checking the ID files")?;
        let _ = fs::remove_dir(&tmp);
        let check_took = check_began.elapsed();
        let o = &checked.outcome;
        let mut text = String::new();
        let _ = writeln!(text, "vesta-rs soak report");
        let _ = writeln!(text, "date: {}", vesta_core::Epoch::rfc3339(started_wall));
        let _ = writeln!(text, "machine: {}", machine());
        let _ = writeln!(
            text,
            "duration: {} (issuing {}, stopping {}), check {} ({} sorted runs on disk)",
            hms(took),
            hms(issuing),
            hms(took.saturating_sub(issuing)),
            hms(check_took),
            o.runs
        );
        let _ = writeln!(text, "IDs handed out and checked: {}", o.total);
        for (class, c) in &checked.classes {
            let _ = writeln!(
                text,
                "  {class}: {} IDs from {} machine IDs, unit starts {} .. {}{}",
                c.ids,
                c.machine_count(),
                vesta_core::Epoch::rfc3339(c.earliest_ms),
                vesta_core::Epoch::rfc3339(c.latest_ms),
                if c.before_start > 0 {
                    format!(
                        ", {} IDs dated before the soak (issued on a clock stepped back)",
                        c.before_start
                    )
                } else {
                    String::new()
                }
            );
        }
        let _ = writeln!(
            text,
            "processes: {} ID files, {} producers killed by the soak, {} clean worker summaries",
            self.outputs.len(),
            self.exits_killed,
            self.summaries
        );
        let _ = writeln!(text, "faults injected: {}", self.schedule.total());
        for f in Fault::ALL {
            let n = self.schedule.injected.get(&f).copied().unwrap_or(0);
            let skipped = self.schedule.skipped.get(&f).copied().unwrap_or(0);
            let _ = writeln!(
                text,
                "  {:<32} {n}{}",
                f.name(),
                if skipped > 0 {
                    format!(" ({skipped} skipped: no target)")
                } else {
                    String::new()
                }
            );
        }
        let _ = writeln!(
            text,
            "seen by workers that stopped cleanly (killed ones took their counts with them):"
        );
        for (k, n) in &self.worker_counts {
            let _ = writeln!(text, "  {k}: {n}");
        }
        let _ = writeln!(text, "{}", self.statics.report());
        let _ = writeln!(
            text,
            "client errors (`vesta gen` runs that exited non-zero): {}",
            self.client_errors.len()
        );
        for e in &self.client_errors {
            let _ = writeln!(text, "  {e}");
        }
        let partial: u64 = o.files.iter().filter(|f| f.partial_tail_bytes > 0).count() as u64;
        let bad: u64 = o.files.iter().map(|f| f.bad_lines).sum();
        let wrong: u64 = checked.classes.values().map(|c| c.wrong).sum();
        let _ = writeln!(
            text,
            "files cut by a kill mid-write: {partial}; malformed lines: {bad}; IDs with a wrong \
             genMethod, pool, type or version: {wrong}"
        );
        if bad > 0 || wrong > 0 {
            self.ctx.finding(format!(
                "{bad} malformed lines and {wrong} IDs with wrong fields"
            ));
        }
        let _ = writeln!(text, "duplicates: {}", o.duplicates);
        let mut violations = 0;
        if let Some(seq) = &self.seq {
            self.ctx.event("checking the sequence calls' history");
            let checked = seq
                .check(self.args.keep)
                .context("checking the sequence calls")?;
            let _ = write!(text, "{}", checked.text);
            for f in checked.findings {
                self.ctx.finding(f);
            }
            violations = checked.violations;
            if violations > 0 {
                self.ctx.finding(format!(
                    "{violations} sequence history violations (kept in {})",
                    self.ctx.dir.join("seq").display()
                ));
            }
        }
        if o.duplicates > 0 {
            let evidence = check::evidence(
                &self.outputs,
                &o.examples,
                &self.ctx.vesta,
                &self.ctx.dir.join("duplicates.txt"),
            );
            let _ = writeln!(text, "{evidence}");
        }
        let _ = writeln!(text, "findings: {}", self.ctx.findings.len());
        for f in &self.ctx.findings {
            let _ = writeln!(text, "  - {}", f.replace('\n', "\n    "));
        }
        let keep = self.args.keep || o.duplicates > 0;
        if !keep {
            let _ = fs::remove_dir_all(&self.ctx.data);
        }
        let _ = writeln!(
            text,
            "work dir: {} (logs, events.log, report.txt{})",
            self.ctx.dir.display(),
            if keep { ", ids/" } else { "" }
        );
        println!("\n{text}");
        fs::write(self.ctx.dir.join("report.txt"), &text)?;
        Ok(if o.duplicates > 0 || violations > 0 {
            ExitCode::from(2)
        } else if self.ctx.findings.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// Host name, CPUs and load, for the report.
fn machine() -> String {
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let cpus = thread::available_parallelism().map_or(0, |n| n.get());
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "{} ({cpus} CPUs, load average at the end {})",
        host.trim(),
        load.join(" ")
    )
}

fn hms(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{:02}s", s / 60, s % 60)
}
