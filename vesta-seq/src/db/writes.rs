//! One write at a time from this process on an SQLite file, a lease's writes first.
//!
//! SQLite locks the whole file for a write, and a writer that finds it locked does not queue:
//! its busy handler sleeps and tries again. Writes that follow each other back to back (a
//! burst of new keys' section loads, each batch a transaction and a sync) can then keep a
//! lease's renewal out for seconds, and a term that lapses refuses every call while the loads
//! go on. So this process's writes on an SQLite file take turns here, in the order they came,
//! and a lease's write (taking, renewing or ending it) goes ahead of every write still waiting:
//! it waits for at most the one under way. PostgreSQL and MySQL lock rows, and a lease's row
//! is nobody else's: nothing takes turns there.
//!
//! Writes from other processes on the same file (the members of a cluster on one host, a
//! `vesta seq raise`) still meet SQLite's busy handler, as before.

use tokio::sync::{Mutex, MutexGuard};

/// The turns of one SQLite file's writes in this process.
#[derive(Default)]
pub(crate) struct Writes {
    /// Held by an ordinary write from before its turn until it is done: at most one of them
    /// waits for `turn` at a time, so a lease's write queues behind the one under way only.
    queue: Mutex<()>,
    /// Held by the write under way (tokio's mutex serves its waiters in order).
    turn: Mutex<()>,
}

/// A write's turn: held while it runs.
pub(crate) struct Turn<'a> {
    _queue: Option<MutexGuard<'a, ()>>,
    _turn: MutexGuard<'a, ()>,
}

impl Writes {
    /// An ordinary write's turn: after every write that asked before it.
    pub(crate) async fn ordinary(&self) -> Turn<'_> {
        let queue = self.queue.lock().await;
        let turn = self.turn.lock().await;
        Turn {
            _queue: Some(queue),
            _turn: turn,
        }
    }

    /// A lease's write's turn: after the write under way (and any lease write before it).
    pub(crate) async fn lease(&self) -> Turn<'_> {
        Turn {
            _queue: None,
            _turn: self.turn.lock().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex as StdMutex};

    use super::*;

    /// The order writes ran in: a write under way, three ordinary writes waiting, then a
    /// lease's write: the lease's runs second.
    #[tokio::test]
    async fn a_lease_write_goes_ahead_of_the_writes_waiting() {
        let writes = Arc::new(Writes::default());
        let ran = Arc::new(StdMutex::new(Vec::new()));
        let under_way = writes.ordinary().await;
        let mut tasks = Vec::new();
        for name in ["ordinary 1", "ordinary 2", "ordinary 3", "lease"] {
            let (writes, ran) = (Arc::clone(&writes), Arc::clone(&ran));
            tasks.push(tokio::spawn(async move {
                let _turn = if name == "lease" {
                    writes.lease().await
                } else {
                    writes.ordinary().await
                };
                ran.lock().unwrap().push(name);
            }));
            // Each waits before the next asks (the current-thread runtime runs it to its wait).
            tokio::task::yield_now().await;
        }
        assert!(
            ran.lock().unwrap().is_empty(),
            "all wait for the write under way"
        );
        drop(under_way);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(
            *ran.lock().unwrap(),
            ["lease", "ordinary 1", "ordinary 2", "ordinary 3"]
        );
    }
}
