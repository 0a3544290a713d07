//! The soak's main loop, one tick at a time: the servers and ZooKeeper kept up, the commands a
//! fault scheduled run when due, the producers' slots refilled at the pace that reaches `--ids`
//! in time, and each ended producer judged. Apart from `main.rs`, which starts and stops it.

use super::*;

impl Soak {
    /// Issues and injects faults until the files hold `--ids` IDs, the time limit passes or a
    /// signal arrives. Returns how long it issued.
    pub(crate) fn issue(&mut self, stop: &AtomicBool) -> Duration {
        let limit = Duration::from_secs_f64(
            self.args
                .limit_minutes
                .unwrap_or(self.args.minutes * 2.0 + 5.0)
                * 60.0,
        );
        let began = Instant::now();
        let mut progress_at = Instant::now() + PROGRESS_EVERY;
        loop {
            let written = self.written_estimate();
            let seq_done = self.seq.as_ref().is_none_or(SeqGroup::done);
            if written >= self.args.ids && seq_done {
                let calls = self.seq.as_ref().map_or(0, SeqGroup::calls_estimate);
                self.ctx.event(format!(
                    "target reached: about {written} IDs written, {calls} sequence calls"
                ));
                break;
            }
            if began.elapsed() >= limit {
                let calls = self.seq.as_ref().map_or(0, SeqGroup::calls_estimate);
                self.ctx.finding(format!(
                    "time limit of {} min reached with about {written} of {} IDs, {calls} of {} \
                     sequence calls",
                    limit.as_secs() / 60,
                    self.args.ids,
                    self.args.seq_calls
                ));
                break;
            }
            if stop.load(Ordering::SeqCst) {
                self.ctx.event("signal received: stopping early");
                break;
            }
            self.tick_servers();
            self.tick_zk();
            self.stores.tick(&mut self.ctx);
            self.run_follow_ups();
            self.tick_producers(written < self.args.ids, written);
            if let Some(seq) = &mut self.seq {
                seq.tick_workers(&mut self.ctx, true);
            }
            self.inject();
            if Instant::now() >= progress_at {
                progress_at += PROGRESS_EVERY;
                let up = self.slots.iter().filter(|s| s.running()).count();
                let calls = self.seq.as_ref().map_or(0, SeqGroup::calls_estimate);
                let msg = format!(
                    "progress: about {:.1}M IDs, {:.2}M sequence calls, {} faults, {up} \
                     producers running",
                    written as f64 / 1e6,
                    calls as f64 / 1e6,
                    self.schedule.total()
                );
                self.ctx.event(msg);
            }
            thread::sleep(TICK);
        }
        began.elapsed()
    }

    /// IDs in the files now, from their sizes.
    pub(crate) fn written_estimate(&self) -> u64 {
        self.outputs
            .iter()
            .map(|o| {
                fs::metadata(&o.file.path).map_or(0, |m| m.len()) / o.file.format.bytes_per_id()
            })
            .sum()
    }

    pub(crate) fn tick_servers(&mut self) {
        for s in &mut self.tcp {
            s.tick(&mut self.ctx);
        }
        self.rest.tick(&mut self.ctx);
        if let Some(seq) = &mut self.seq {
            seq.tick_members(&mut self.ctx);
        }
    }

    /// Notices the end of a ZooKeeper node's restart.
    pub(crate) fn tick_zk(&mut self) {
        let finished = self
            .zk_restart
            .as_ref()
            .is_some_and(|(_, h)| h.is_finished());
        if !finished {
            return;
        }
        let Some((i, handle)) = self.zk_restart.take() else {
            return;
        };
        match handle.join() {
            Ok(Ok(())) => {
                let pid = self
                    .zk
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pid(i);
                if let Some(pid) = pid {
                    self.ctx.pids.record(pid, &format!("zookeeper-{}", i + 1));
                }
                self.ctx.event(format!(
                    "ZooKeeper node {} serving again (pid {})",
                    i + 1,
                    pid_text(pid)
                ));
            }
            Ok(Err(e)) => self
                .ctx
                .finding(format!("ZooKeeper node {} did not restart: {e}", i + 1)),
            Err(_) => self
                .ctx
                .finding(format!("the restart of ZooKeeper node {} panicked", i + 1)),
        }
    }

    pub(crate) fn run_follow_ups(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.follow_ups)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.follow_ups = later;
        for (_, f) in due {
            match f {
                FollowUp::RestartZk(i) => {
                    let zk = self.zk.clone();
                    let handle = thread::spawn(move || {
                        catch_unwind(AssertUnwindSafe(|| {
                            zk.lock().unwrap_or_else(PoisonError::into_inner).restart(i);
                        }))
                        .map_err(|p| {
                            p.downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                                .unwrap_or_else(|| "panicked".into())
                        })
                    });
                    self.ctx
                        .event(format!("starting ZooKeeper node {} again", i + 1));
                    self.zk_restart = Some((i, handle));
                }
                FollowUp::Send {
                    slot,
                    incarnation,
                    line,
                } => {
                    if self.slots[slot].send(incarnation, line) {
                        let name = self.slots[slot].name.clone();
                        self.ctx.event(format!("{name}.{incarnation}: {line}"));
                    }
                }
            }
        }
    }

    /// Reaps ended producers and, while `spawn` holds, starts the next ones when due.
    pub(crate) fn tick_producers(&mut self, spawn: bool, written: u64) {
        for i in 0..self.slots.len() {
            if let Some(ended) = self.slots[i].tick(&mut self.ctx, &self.outputs) {
                self.ended(i, ended);
            }
            // A static slot waits while a burst of parallel runs goes on its machine ID.
            if spawn && self.slots[i].due() && !self.statics.busy(i) {
                let (count, rate) = self.plan(i, written);
                if matches!(self.slots[i].role, Role::StaticGen { .. }) {
                    self.statics.before_spawn(i);
                }
                let slot = &mut self.slots[i];
                slot.spawn(&mut self.ctx, &mut self.outputs, count, rate);
                if slot.role.is_gen() {
                    let paced = Duration::from_secs_f64(count as f64 / rate.max(1.0));
                    slot.start_not_before(Instant::now() + paced);
                }
            }
        }
        self.statics.tick(&mut self.ctx, &self.slots);
    }

    /// The chunk and rate of the next process of slot `i`: the IDs still missing, shared by
    /// class (embedded 55 %: ZooKeeper-leased 45 %, SQL- and etcd-leased 5 % each; tcp 27 %,
    /// rest 18 %; the static group 5 % and its alias pair 2 % over them) over the planned time
    /// still left. A static (or alias) slot's run is 3 s of its rate (at least 1,000 IDs): it
    /// restarts every few seconds.
    pub(crate) fn plan(&self, i: usize, written: u64) -> (u64, f64) {
        let class = self.slots[i].role.class();
        let shares = [
            ("embed", 0.45),
            ("embed-sql", 0.05),
            ("embed-etcd", 0.05),
            ("tcp", 0.27),
            ("rest", 0.18),
            ("static", 0.05),
            ("alias", 0.02),
        ];
        let present: f64 = shares
            .iter()
            .filter(|(c, _)| self.slots.iter().any(|s| s.role.class() == *c))
            .map(|(_, s)| s)
            .sum();
        let share = shares
            .iter()
            .find(|(c, _)| *c == class)
            .map_or(0.0, |s| s.1)
            / present;
        let peers = self
            .slots
            .iter()
            .filter(|s| s.role.class() == class)
            .count() as f64;
        let planned = self.args.minutes * 60.0;
        let left_s = (planned - self.ctx.start.elapsed().as_secs_f64()).max(60.0);
        let missing = self.args.ids.saturating_sub(written) as f64;
        let rate = (missing / left_s).max(self.target_rate * 0.25) * share / peers;
        let slot_total = self.args.ids as f64 * share / peers;
        let count = match self.slots[i].role {
            Role::Embed(..) => slot_total / 4.0,
            Role::Rest { .. } => slot_total / 3.0,
            Role::TcpGen { .. } => (slot_total / 25.0).min(2e6),
            Role::StaticGen { .. } | Role::AliasGen { .. } => {
                return ((rate * 3.0).max(1000.0) as u64, rate.max(100.0));
            }
        };
        (count.max(20_000.0) as u64, rate.max(100.0))
    }

    /// Books an ended producer: summaries of workers, errors of `vesta gen` runs.
    pub(crate) fn ended(&mut self, i: usize, ended: producers::Ended) {
        let class = self.slots[i].role.class();
        if ended.killed {
            self.exits_killed += 1;
            return;
        }
        if !ended.status.success() {
            let line = format!(
                "{} exited with {} after {:.1} s: {}",
                ended.name,
                ended.status,
                ended.started.elapsed().as_secs_f64(),
                ended.log_tail.lines().last().unwrap_or("")
            );
            self.ctx.event(format!("client error: {line}"));
            self.client_errors.push(line);
            return;
        }
        let Some(path) = ended.summary else { return };
        let summary: Option<serde_json::Value> = fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        match summary {
            Some(v) => {
                self.summaries += 1;
                if let Some(counts) = v.get("counts").and_then(|c| c.as_object()) {
                    for (k, n) in counts {
                        *self
                            .worker_counts
                            .entry(format!("{class}: {k}"))
                            .or_insert(0) += n.as_u64().unwrap_or(0);
                    }
                }
            }
            None => self.ctx.finding(format!(
                "{} exited 0 without a readable summary at {}",
                ended.name,
                path.display()
            )),
        }
    }
}
