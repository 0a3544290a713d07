//! Following the sequences cluster's moves (docs/seq-cluster.md): a key's set is served by one
//! member; another answers `SEQ_MOVED` with that member's address, or `SEQ_MOVING` while the
//! set changes hands. The client sends a key's calls to the member it last learned serves it
//! (a hint per key hash: a fixed table, so memory stays bounded whatever the keys; a stale or
//! shared hint costs one more hop, never a wrong answer, since only the owner answers), follows
//! a move at once and waits out a hand-off within the retry budget, asking the next server
//! after each `SEQ_MOVING` (the one that said it may be the member cut off from the database).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tokio::time::sleep;

use super::Client;
use crate::error::ClientError;
use crate::proto::{ErrorCode, Request, Response};

/// Hints: slot = the key's set; value = endpoint index + 1 (0: none).
pub(super) struct Routes(Box<[AtomicU32]>);

/// Slots of the hint table: one per set.
const SLOTS: usize = vesta_core::seq_place::SEQ_SETS as usize;

/// Moves followed in a row before pausing: members that name each other disagree for at most a
/// beat (each learns a hand-off at its next), so the call waits then, within the budget.
const MAX_HOPS: u32 = 4;

impl Default for Routes {
    fn default() -> Self {
        Routes((0..SLOTS).map(|_| AtomicU32::new(0)).collect())
    }
}

impl Routes {
    fn slot(key: &[u8]) -> usize {
        vesta_core::seq_place::seq_set_of(key) as usize
    }

    fn get(&self, key: &[u8]) -> Option<usize> {
        match self.0[Self::slot(key)].load(Ordering::Relaxed) {
            0 => None,
            n => Some(n as usize - 1),
        }
    }

    fn set(&self, key: &[u8], endpoint: usize) {
        self.0[Self::slot(key)].store(endpoint as u32 + 1, Ordering::Relaxed);
    }

    fn clear(&self, key: &[u8]) {
        self.0[Self::slot(key)].store(0, Ordering::Relaxed);
    }
}

impl Client {
    /// Sends a sequence request for `key`: to the member last learned to serve it (else as any
    /// request), following `SEQ_MOVED` to the member named and retrying `SEQ_MOVING` (and,
    /// with more than one server to ask, `SEQ_UNAVAILABLE`) on the next server until the retry
    /// budget runs out. Returns the answer and the endpoint that gave it.
    pub(super) async fn seq_request(
        &self,
        key: &[u8],
        request: &Request,
    ) -> Result<(Response, usize), ClientError> {
        let inner = &*self.inner;
        let began = Instant::now();
        let mut hops = 0;
        let mut pause = Duration::from_millis(5);
        loop {
            let answer = match inner.seq_routes.get(key) {
                Some(i) => match self.attempt(i, request).await {
                    Ok(answer) => (answer, i),
                    // The member named is down (killed, or its lease about to run out): forget
                    // it, wait, and ask again: the others name the next owner once its lease
                    // expires (or answer SEQ_MOVING until one takes the set).
                    Err(e) => {
                        inner.seq_routes.clear(key);
                        let waited = began.elapsed();
                        if waited + pause > inner.config.retry_budget {
                            return Err(ClientError::Unavailable {
                                attempts: 1,
                                elapsed_ms: waited.as_millis() as u64,
                                last: format!("{}: {e}", self.endpoint_name(i)),
                            });
                        }
                        inner.counters.retries.fetch_add(1, Ordering::Relaxed);
                        sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(200));
                        // Moves to a member that is down are waited out (above), not counted.
                        hops = 0;
                        continue;
                    }
                },
                None => self.server_only(request).await?,
            };
            match answer {
                (
                    Response::Error {
                        code: ErrorCode::SeqMoved,
                        message,
                    },
                    ep,
                ) => {
                    let addr = message.split(' ').next().unwrap_or_default();
                    let Some(to) = inner.endpoints.iter().position(|e| e.addr() == addr) else {
                        return Err(ClientError::Refused {
                            endpoint: self.endpoint_name(ep),
                            code: ErrorCode::SeqMoved,
                            message: format!(
                                "{message} (the owner {addr} is not among this client's \
                                 servers: list every member of the cluster)"
                            ),
                        });
                    };
                    inner.seq_routes.set(key, to);
                    hops += 1;
                    if hops > MAX_HOPS {
                        // Members naming each other: one of them has not seen the hand-off yet
                        // (each learns it at its next beat). Wait, as for SEQ_MOVING, within
                        // the budget.
                        if began.elapsed() + pause > inner.config.retry_budget {
                            return Err(ClientError::Refused {
                                endpoint: self.endpoint_name(ep),
                                code: ErrorCode::SeqMoved,
                                message: format!(
                                    "{message} (moved {hops} times in one call, and still \
                                     moving after {} ms, the retry budget)",
                                    began.elapsed().as_millis()
                                ),
                            });
                        }
                        inner.counters.retries.fetch_add(1, Ordering::Relaxed);
                        sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(200));
                        hops = 0;
                    }
                }
                // Between owners; or, with other members to ask, a member that could not reach
                // its table or coordination in time (cut off: its sets move on once its lease
                // runs out). A single server's SEQ_UNAVAILABLE is answered at once (below).
                (
                    Response::Error {
                        code: code @ (ErrorCode::SeqMoving | ErrorCode::SeqUnavailable),
                        message,
                    },
                    ep,
                ) if code == ErrorCode::SeqMoving || inner.endpoints.len() > 1 => {
                    if began.elapsed() + pause > inner.config.retry_budget {
                        let still = match code {
                            ErrorCode::SeqMoving => "moving",
                            _ => "unavailable",
                        };
                        return Err(ClientError::Refused {
                            endpoint: self.endpoint_name(ep),
                            code,
                            message: format!(
                                "{message} (still {still} after {} ms, the retry budget)",
                                began.elapsed().as_millis()
                            ),
                        });
                    }
                    inner.counters.retries.fetch_add(1, Ordering::Relaxed);
                    // Ask the next server: this one may be cut off from the database (its term
                    // lapsed) while another has taken the set meanwhile.
                    inner.seq_routes.set(key, (ep + 1) % inner.endpoints.len());
                    sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                (answer, ep) => {
                    inner.seq_routes.set(key, ep);
                    return Ok((answer, ep));
                }
            }
        }
    }
}
