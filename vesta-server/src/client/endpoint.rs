//! One server endpoint: its address, whether it is believed alive, and a small pool of pipelined
//! connections opened on demand (one connect at a time per slot, so a dead server is not hammered
//! by every waiting caller at once).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;

use super::ClientConfig;
use super::conn::{Conn, LayoutPin};
use crate::error::AttemptError;
use crate::proto::{Request, Response};

#[derive(Default)]
struct Slot {
    conn: Mutex<Option<Arc<Conn>>>,
    /// Held while connecting.
    connecting: AsyncMutex<()>,
    /// The last failed connect: callers that queued behind it share its result.
    failed: Mutex<Option<(Instant, AttemptError)>>,
}

impl Slot {
    fn usable(&self) -> Option<Arc<Conn>> {
        let c = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        c.as_ref().filter(|c| c.is_usable()).cloned()
    }

    fn set(&self, conn: Arc<Conn>) {
        *self.conn.lock().unwrap_or_else(PoisonError::into_inner) = Some(conn);
    }
}

/// A server the client may send to.
pub(crate) struct Endpoint {
    addr: String,
    healthy: AtomicBool,
    slots: Vec<Slot>,
    next: AtomicUsize,
}

impl Endpoint {
    /// An endpoint with `connections` slots, believed alive until proven otherwise.
    pub(crate) fn new(addr: String, connections: usize) -> Self {
        Endpoint {
            addr,
            healthy: AtomicBool::new(true),
            slots: (0..connections.max(1)).map(|_| Slot::default()).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// `host:port`.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// True while the endpoint is believed alive.
    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Sets the belief; true if it changed.
    pub(crate) fn set_healthy(&self, healthy: bool) -> bool {
        self.healthy.swap(healthy, Ordering::Relaxed) != healthy
    }

    /// A usable connection, round-robin over the slots, connecting if needed; true if it was
    /// connected just now.
    pub(crate) async fn conn(
        &self,
        config: &ClientConfig,
        pin: &LayoutPin,
    ) -> Result<(Arc<Conn>, bool), AttemptError> {
        let slot = &self.slots[self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len()];
        if let Some(c) = slot.usable() {
            return Ok((c, false));
        }
        let asked = Instant::now();
        let _guard = slot.connecting.lock().await;
        if let Some(c) = slot.usable() {
            return Ok((c, false));
        }
        if let Some((at, e)) = &*slot.failed.lock().unwrap_or_else(PoisonError::into_inner)
            && *at >= asked
        {
            return Err(e.clone());
        }
        match Conn::connect(
            &self.addr,
            config.connect_timeout,
            config.max_in_flight_per_connection,
            config.tls.as_ref(),
            pin,
        )
        .await
        {
            Ok(c) => {
                let c = Arc::new(c);
                slot.set(c.clone());
                Ok((c, true))
            }
            Err(e) => {
                *slot.failed.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((Instant::now(), e.clone()));
                Err(e)
            }
        }
    }

    /// The health check of an endpoint marked dead: a fresh connection whose `INFO` says the
    /// server is issuing. On success the connection joins the pool.
    pub(crate) async fn check(&self, config: &ClientConfig, pin: &LayoutPin) -> bool {
        let conn = match Conn::connect(
            &self.addr,
            config.connect_timeout,
            config.max_in_flight_per_connection,
            config.tls.as_ref(),
            pin,
        )
        .await
        {
            Ok(c) => Arc::new(c),
            Err(_) => return false,
        };
        let issuing = match conn.call(&Request::Info, config.request_timeout).await {
            Ok(Response::Info(info)) => info.lease_state().is_some_and(|s| s.can_issue()),
            _ => false,
        };
        if issuing && let Some(slot) = self.slots.iter().find(|s| s.usable().is_none()) {
            slot.set(conn);
        }
        issuing
    }
}
