//! How a request finds a server that answers it: endpoints believed alive first, then the
//! others; a round in which every endpoint failed goes to the fallback issuer or pauses with
//! exponential backoff and jitter, within the retry budget. Endpoints marked dead are
//! re-checked in the background until they answer again.

use std::sync::Weak;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::{Instant, sleep};

use super::{Client, Inner};
use crate::error::{AttemptError, ClientError};
use crate::proto::{Request, Response};

/// Which source answered a call.
pub(super) enum Source {
    Server(Response),
    Fallback,
}

impl Client {
    /// Like [`request`](Self::request) for operations the fallback cannot answer.
    pub(super) async fn server_only(
        &self,
        request: &Request,
    ) -> Result<(Response, usize), ClientError> {
        match self.request_inner(request, false).await? {
            (Source::Server(r), ep) => Ok((r, ep)),
            (Source::Fallback, _) => Err(ClientError::Fallback("not for this operation".into())),
        }
    }

    pub(super) async fn request(&self, request: &Request) -> Result<(Source, usize), ClientError> {
        self.request_inner(request, true).await
    }

    /// Sends `request` until some endpoint answers it: endpoints believed alive first, in order,
    /// then the others; a round in which every endpoint failed goes to the fallback (if allowed
    /// and configured) or pauses with exponential backoff and jitter, within the retry budget.
    async fn request_inner(
        &self,
        request: &Request,
        may_fall_back: bool,
    ) -> Result<(Source, usize), ClientError> {
        let inner = &*self.inner;
        let start = Instant::now();
        let mut backoff = inner.config.backoff_initial;
        let mut attempts = 0u32;
        let mut last = String::from("no attempt made");
        let mut order = Vec::with_capacity(inner.endpoints.len());
        loop {
            order.clear();
            order.extend((0..inner.endpoints.len()).filter(|&i| inner.endpoints[i].is_healthy()));
            order.extend((0..inner.endpoints.len()).filter(|&i| !inner.endpoints[i].is_healthy()));
            for &i in &order {
                attempts += 1;
                match self.attempt(i, request).await {
                    Ok(Response::Error { code, message }) if code.is_retryable() => {
                        // Not issuing (lease, clock) or going away: prefer the others for now.
                        self.mark_dead(i);
                        last = format!("{}: {message} ({code})", self.endpoint_name(i));
                    }
                    Ok(answer) => {
                        inner.counters.served.fetch_add(1, Ordering::Relaxed);
                        return Ok((Source::Server(answer), i));
                    }
                    Err(e) => {
                        self.mark_dead(i);
                        last = format!("{}: {e}", self.endpoint_name(i));
                    }
                }
                inner.counters.retries.fetch_add(1, Ordering::Relaxed);
                if start.elapsed() >= inner.config.retry_budget {
                    break;
                }
            }
            if may_fall_back && inner.fallback.is_some() {
                inner.counters.fallback.fetch_add(1, Ordering::Relaxed);
                return Ok((Source::Fallback, usize::MAX));
            }
            let elapsed = start.elapsed();
            if elapsed + backoff > inner.config.retry_budget {
                return Err(ClientError::Unavailable {
                    attempts,
                    elapsed_ms: elapsed.as_millis() as u64,
                    last,
                });
            }
            sleep(jitter(backoff)).await;
            backoff = (backoff * 2).min(inner.config.backoff_max);
        }
    }

    /// One try of `request` on endpoint `i`.
    pub(super) async fn attempt(
        &self,
        i: usize,
        request: &Request,
    ) -> Result<Response, AttemptError> {
        let inner = &*self.inner;
        let ep = &inner.endpoints[i];
        let (conn, fresh) = ep.conn(&inner.config, &inner.pin).await?;
        // A new connection and handshake is a sign of life (an answer on an old one is not:
        // it may have been sent just before the server died).
        if fresh && ep.set_healthy(true) {
            inner.counters.revived.fetch_add(1, Ordering::Relaxed);
        }
        inner
            .max_batch
            .fetch_min(conn.hello().max_batch, Ordering::Relaxed);
        conn.call(request, inner.config.request_timeout).await
    }

    fn mark_dead(&self, i: usize) {
        if self.inner.endpoints[i].set_healthy(false) {
            self.inner.counters.dead.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(endpoint = self.inner.endpoints[i].addr(), "marked dead");
        }
    }
}

/// `d` scaled by a pseudo-random factor in [0.5, 1.5), so clients that failed together do not
/// retry together.
fn jitter(d: Duration) -> Duration {
    static SEED: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
    let x = SEED.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
    let mut z = x ^ (x >> 31);
    z = z.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^= z >> 29;
    let frac = (z % 1000) as f64 / 1000.0 + 0.5;
    d.mul_f64(frac)
}

/// Re-checks endpoints marked dead every `health_check_interval` until the client is dropped.
pub(super) async fn health_loop(inner: Weak<Inner>) {
    loop {
        let interval = match inner.upgrade() {
            Some(i) => i.config.health_check_interval,
            None => return,
        };
        sleep(interval).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        for ep in inner.endpoints.iter().filter(|e| !e.is_healthy()) {
            if ep.check(&inner.config, &inner.pin).await && ep.set_healthy(true) {
                inner.counters.revived.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(endpoint = ep.addr(), "alive again");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_half_to_one_and_a_half() {
        for _ in 0..1000 {
            let j = jitter(Duration::from_millis(100));
            assert!(j >= Duration::from_millis(50) && j < Duration::from_millis(150));
        }
    }
}
