//! The clock thread of an [`AsyncIssuer`](super::AsyncIssuer): idle until a call parks, then at
//! each unit boundary it serves the waiting list and sleeps precisely to the next boundary while
//! calls still wait. It holds no lock while it sleeps.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use vesta_core::Clock;

use super::Shared;
use super::queue::Served;

/// Starts the thread; it ends when stopped or when the last handle is dropped.
pub(super) fn spawn<C: Clock + 'static>(
    shared: Arc<Shared<C>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("vesta-unit-clock".into())
        .spawn(move || run(&shared))
}

fn run<C: Clock + 'static>(s: &Shared<C>) {
    let capacity = s.issuer.capacity_per_unit();
    let mut p = s.lock();
    loop {
        if p.stop {
            p.queue.fail_all(&super::shut_down());
            s.parked.store(0, Ordering::Relaxed);
            return;
        }
        if p.queue.is_empty() {
            p.idle = true;
            p = s
                .wake
                .wait(p)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            p.idle = false;
            continue;
        }
        let expired = p.queue.expire(Instant::now(), s.max_wait);
        s.expired_total.fetch_add(expired as u64, Ordering::Relaxed);
        let served = p.queue.serve_unit(capacity, |n| s.issuer.try_next_ids(n));
        s.parked.store(p.queue.len(), Ordering::Relaxed);
        if served == Served::UnitUsedUp {
            let carried = p.queue.len() as u64;
            s.unit_waits_total.fetch_add(carried, Ordering::Relaxed);
            drop(p);
            // Bounded even if the clock steps back meanwhile (the Clock contract).
            s.issuer
                .clock()
                .wait_until_ms(s.issuer.next_unit_start_ms());
            p = s.lock();
        }
    }
}
