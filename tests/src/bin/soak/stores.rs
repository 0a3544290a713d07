//! The soak's other lease stores: a PostgreSQL server and an etcd member, leased from by the
//! SQL- and etcd-leased embedded workers; and their crashes: a store stopped (PostgreSQL's
//! immediate shutdown, etcd's SIGKILL), down for [`DOWN_FOR`], then started again on the same
//! port and data, on a thread of its own so the soak goes on meanwhile.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use vesta_tests::db::Postgres;
use vesta_tests::etcd::Etcd;

use crate::Ctx;

/// How long a crashed store stays down: as long as a lease, so its holders fence.
const DOWN_FOR: Duration = Duration::from_secs(5);

/// One of the stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The PostgreSQL server.
    Postgres,
    /// The etcd member.
    Etcd,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Postgres => "PostgreSQL",
            Which::Etcd => "etcd",
        }
    }
}

/// What a crash does to a store: the harnesses' own stop, restart and PID.
trait Crashable: Send {
    fn stop(&mut self);
    fn restart(&mut self);
    fn pid(&self) -> Option<u32>;
}

impl Crashable for Postgres {
    fn stop(&mut self) {
        Postgres::stop(self);
    }
    fn restart(&mut self) {
        Postgres::restart(self);
    }
    fn pid(&self) -> Option<u32> {
        Postgres::pid(self)
    }
}

impl Crashable for Etcd {
    fn stop(&mut self) {
        Etcd::stop(self);
    }
    fn restart(&mut self) {
        Etcd::restart(self);
    }
    fn pid(&self) -> Option<u32> {
        Etcd::pid(self)
    }
}

type Shared = Arc<Mutex<dyn Crashable>>;

/// The stores that run, and a crash in progress.
#[derive(Default)]
pub struct Stores {
    pg: Option<Shared>,
    etcd: Option<Shared>,
    down: Option<(Which, JoinHandle<Result<(), String>>)>,
}

impl Stores {
    /// Starts PostgreSQL if `sql` (with a database `soak`) or `seq` (with a database `seq`, the
    /// sequence group's), etcd if `etcd`; their URLs go to `ctx`, their PIDs to its PID file.
    pub fn start(sql: bool, etcd: bool, seq: bool, ctx: &mut Ctx) -> Stores {
        let mut stores = Stores::default();
        if sql || seq {
            let pg = Postgres::start();
            if sql {
                ctx.sql_url = pg.create_database("soak");
            }
            if seq {
                ctx.seq_url = pg.create_database("seq");
            }
            ctx.pg_port = pg.port();
            if let Some(pid) = pg.pid() {
                ctx.pids.record(pid, "postgres");
            }
            ctx.event(format!(
                "PostgreSQL up on port {}: {} {}",
                ctx.pg_port, ctx.sql_url, ctx.seq_url
            ));
            stores.pg = Some(Arc::new(Mutex::new(pg)));
        }
        if etcd {
            let e = Etcd::start();
            ctx.etcd_url = e.url();
            if let Some(pid) = e.pid() {
                ctx.pids.record(pid, "etcd");
            }
            ctx.event(format!("etcd up: {}", ctx.etcd_url));
            stores.etcd = Some(Arc::new(Mutex::new(e)));
        }
        stores
    }

    /// The fault: crashes `which` and starts it again [`DOWN_FOR`] later. False if it does
    /// not run or a crash is still in progress.
    pub fn crash(&mut self, which: Which, ctx: &mut Ctx) -> bool {
        if self.down.is_some() {
            return false;
        }
        let Some(store) = self.store(which).cloned() else {
            return false;
        };
        let restart = move || {
            let mut store = store.lock().unwrap_or_else(PoisonError::into_inner);
            store.stop();
            thread::sleep(DOWN_FOR);
            store.restart();
        };
        let pid = self.pid(which);
        ctx.event(format!(
            "crashing {} (pid {}); it starts again in {} s",
            which.name(),
            crate::pid_text(pid),
            DOWN_FOR.as_secs()
        ));
        let handle = thread::spawn(move || {
            catch_unwind(AssertUnwindSafe(restart)).map_err(|p| {
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "panicked".into())
            })
        });
        self.down = Some((which, handle));
        true
    }

    fn store(&self, which: Which) -> Option<&Shared> {
        match which {
            Which::Postgres => self.pg.as_ref(),
            Which::Etcd => self.etcd.as_ref(),
        }
    }

    fn pid(&self, which: Which) -> Option<u32> {
        self.store(which)
            .and_then(|s| s.lock().unwrap_or_else(PoisonError::into_inner).pid())
    }

    /// Notices the end of a crash: the store serves again (or did not come back: a finding).
    pub fn tick(&mut self, ctx: &mut Ctx) {
        if !self.down.as_ref().is_some_and(|(_, h)| h.is_finished()) {
            return;
        }
        let Some((which, handle)) = self.down.take() else {
            return;
        };
        match handle.join() {
            Ok(Ok(())) => {
                let pid = self.pid(which);
                if let Some(pid) = pid {
                    ctx.pids.record(pid, &which.name().to_lowercase());
                }
                ctx.event(format!(
                    "{} serving again (pid {})",
                    which.name(),
                    crate::pid_text(pid)
                ));
            }
            Ok(Err(e)) => ctx.finding(format!("{} did not restart: {e}", which.name())),
            Err(_) => ctx.finding(format!("the restart of {} panicked", which.name())),
        }
    }

    /// Waits for a crash in progress to end (the workers stop cleanly against a live store).
    pub fn settle(&mut self, ctx: &mut Ctx) {
        if let Some((_, handle)) = &self.down {
            while !handle.is_finished() {
                thread::sleep(Duration::from_millis(50));
            }
        }
        self.tick(ctx);
    }

    /// Stops both (killed by PID).
    pub fn stop(&mut self) {
        self.settle_quietly();
        self.pg = None;
        self.etcd = None;
    }

    fn settle_quietly(&mut self) {
        if let Some((_, handle)) = self.down.take() {
            let _ = handle.join();
        }
    }
}
