//! Injecting the soak's faults: the due one from the schedule (`faults.rs`), its victim picked
//! among the running processes of its class, and what it does to that process or store, with
//! the follow-up it schedules (a restart, a store back up).

use super::*;

impl Soak {
    /// Applies the due fault, if its target is there.
    pub(crate) fn inject(&mut self) {
        let Some(fault) = self.schedule.due(&mut self.rng) else {
            return;
        };
        if self.apply(fault) {
            self.schedule.applied();
        } else if let Some(f) = self.schedule.not_now() {
            self.ctx
                .event(format!("skipped `{}`: no target for 20 s", f.name()));
        }
    }

    /// A random slot of a class (`embed`: every embedded worker, whatever its store) that runs
    /// (or not).
    pub(crate) fn pick(&mut self, class: &str, running: bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.slots.len())
            .filter(|&i| {
                let role = &self.slots[i].role;
                let of_class = role.class() == class || (class == "embed" && role.is_embed());
                of_class && self.slots[i].running() == running
            })
            .collect();
        (!candidates.is_empty()).then(|| candidates[self.rng.index(candidates.len())])
    }

    pub(crate) fn apply(&mut self, fault: Fault) -> bool {
        let now = Instant::now();
        let all_tcp_up = self.tcp.iter().all(Server::is_up);
        match fault {
            Fault::KillEmbedWorker | Fault::KillRestClient => {
                let class = if fault == Fault::KillEmbedWorker {
                    "embed"
                } else {
                    "rest"
                };
                match self.pick(class, true) {
                    Some(i) => self.slots[i].kill(&mut self.ctx),
                    None => false,
                }
            }
            Fault::KillTcpClient => {
                // A `vesta gen` run killed mid-stream: a paced run that is writing, else one
                // started now (2M IDs, more than it writes before the kill) and killed after a
                // random 1 to 100,000 IDs — polled every 2 ms, since a run writes a second's
                // whole unit (2^20 IDs) in a fraction of a second.
                let writing: Vec<usize> = (0..self.slots.len())
                    .filter(|&i| self.slots[i].role.class() == "tcp" && self.slots[i].writing())
                    .collect();
                if !writing.is_empty() {
                    let i = writing[self.rng.index(writing.len())];
                    return self.slots[i].kill(&mut self.ctx);
                }
                if self.pick("tcp", true).is_some() {
                    return false;
                }
                let Some(i) = self.pick("tcp", false) else {
                    return false;
                };
                let (count, rate) = self.plan(i, self.written_estimate());
                let count = count.max(2_000_000);
                self.slots[i].spawn(&mut self.ctx, &mut self.outputs, count, rate);
                let bytes = self.rng.range(1, 100_000) * Format::Text.bytes_per_id();
                let until = Instant::now() + Duration::from_secs(5);
                while Instant::now() < until {
                    if self.slots[i].output_len(&self.outputs) >= bytes {
                        break;
                    }
                    if !self.slots[i].alive() {
                        return false;
                    }
                    thread::sleep(Duration::from_millis(2));
                }
                self.slots[i].kill(&mut self.ctx)
            }
            Fault::KillTcpServer | Fault::RestartTcpServer if all_tcp_up => {
                let s = self.rng.index(self.tcp.len());
                if fault == Fault::KillTcpServer {
                    self.tcp[s].crash(&mut self.ctx)
                } else {
                    self.tcp[s].restart(&mut self.ctx)
                }
            }
            Fault::KillRestServer => self.rest.crash(&mut self.ctx),
            Fault::RestartRestServer => self.rest.restart(&mut self.ctx),
            Fault::KillZkLeader if self.zk_restart.is_none() && !self.zk_restart_pending() => {
                let mut zk = self.zk.lock().unwrap_or_else(PoisonError::into_inner);
                let Some(leader) = zk.leader() else {
                    return false;
                };
                let pid = zk.pid(leader);
                zk.kill(leader);
                drop(zk);
                self.ctx.event(format!(
                    "SIGKILL ZooKeeper leader, node {} (pid {})",
                    leader + 1,
                    pid_text(pid)
                ));
                self.follow_ups
                    .push((now + ZK_DOWN_FOR, FollowUp::RestartZk(leader)));
                true
            }
            Fault::CrashPostgres => self.stores.crash(Which::Postgres, &mut self.ctx),
            Fault::KillEtcd => self.stores.crash(Which::Etcd, &mut self.ctx),
            Fault::RestoreStateFile => self.statics.restore(
                &mut self.ctx,
                &mut self.slots,
                &mut self.outputs,
                &mut self.rng,
            ),
            Fault::EpochFlip => {
                self.statics
                    .flip(&mut self.ctx, &self.slots, &mut self.outputs, &mut self.rng)
            }
            Fault::ParallelGen => {
                self.statics
                    .burst(&mut self.ctx, &self.slots, &mut self.outputs, &mut self.rng)
            }
            Fault::DeleteHold => self.statics.delete_hold(
                &mut self.ctx,
                &mut self.slots,
                &mut self.outputs,
                &mut self.rng,
            ),
            Fault::KillSeqMember
            | Fault::RestartSeqMember
            | Fault::PartitionSeqMember
            | Fault::SecondSeqServer
            | Fault::RestoreSeqTable => {
                let Some(seq) = &mut self.seq else {
                    return false;
                };
                match fault {
                    Fault::KillSeqMember => seq.kill(&mut self.ctx, &mut self.rng),
                    Fault::RestartSeqMember => seq.restart(&mut self.ctx, &mut self.rng),
                    Fault::SecondSeqServer => seq.second_server(&mut self.ctx),
                    Fault::RestoreSeqTable => seq.backup_or_put_back(&mut self.ctx),
                    _ => seq.partition(&mut self.ctx, &mut self.rng),
                }
            }
            Fault::ClockBack5ms | Fault::ClockBack1s | Fault::ClockBack1h => {
                let Some(i) = self.pick("embed", true) else {
                    return false;
                };
                let Some(incarnation) = self.slots[i].run.as_ref().map(|r| r.incarnation) else {
                    return false;
                };
                let line = match fault {
                    Fault::ClockBack5ms => "step -5",
                    Fault::ClockBack1s => "step -1000",
                    _ => "step -3600000",
                };
                if !self.slots[i].send(incarnation, line) {
                    return false;
                }
                let name = self.slots[i].name.clone();
                self.ctx.event(format!("{name}.{incarnation}: {line}"));
                if fault == Fault::ClockBack1h {
                    let slot = i;
                    self.follow_ups.push((
                        now + Duration::from_secs(3),
                        FollowUp::Send {
                            slot,
                            incarnation,
                            line: "restart",
                        },
                    ));
                    self.follow_ups.push((
                        now + Duration::from_secs(6),
                        FollowUp::Send {
                            slot,
                            incarnation,
                            line: "step 3600000",
                        },
                    ));
                }
                true
            }
            _ => false,
        }
    }

    pub(crate) fn zk_restart_pending(&self) -> bool {
        self.follow_ups
            .iter()
            .any(|(_, f)| matches!(f, FollowUp::RestartZk(_)))
    }
}
