//! The server-wide budget of unsent response bytes (`server.max_unsent_bytes`): bytes a response
//! body has handed to hyper and the client has not taken yet. A client that grants no HTTP/2
//! window, or reads nothing, pins what it was sent; the budget caps that across all connections,
//! so such clients get 503s instead of growing the server.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// Bytes of response bodies that may be held at once, shared by all connections.
#[derive(Clone, Debug)]
pub struct UnsentBudget {
    bytes: Arc<Semaphore>,
    max: usize,
}

/// Bytes taken from the budget; given back when dropped (the body and all its chunks are gone).
#[derive(Debug)]
pub struct Reservation {
    bytes: usize,
    _permit: OwnedSemaphorePermit,
}

impl Reservation {
    /// The bytes it holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl UnsentBudget {
    /// A budget of `max` bytes.
    pub fn new(max: u64) -> Self {
        let max = usize::try_from(max)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        UnsentBudget {
            bytes: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// Takes `bytes` from the budget, or says (503, retry in a second) that it is used up.
    pub fn reserve(&self, bytes: usize) -> Result<Reservation, ApiError> {
        self.reserve_leaving(bytes, 0)
    }

    /// Takes `bytes` only if about `headroom` bytes stay free after it (concurrent callers may
    /// each see the same free bytes, so the headroom is kept approximately): ID batches leave
    /// room for metrics scrapes, so clients that hoard batches cannot blind the operator.
    pub fn reserve_leaving(&self, bytes: usize, headroom: usize) -> Result<Reservation, ApiError> {
        let n = u32::try_from(bytes).unwrap_or(u32::MAX);
        let free = self.bytes.available_permits();
        let acquired = if free >= bytes.saturating_add(headroom) {
            Arc::clone(&self.bytes).try_acquire_many_owned(n).ok()
        } else {
            None
        };
        match acquired {
            Some(permit) => Ok(Reservation {
                bytes: n as usize,
                _permit: permit,
            }),
            None => Err(ApiError::unavailable(
                format!(
                    "busy: {} of {} bytes of responses are waiting for clients to take them \
                     (server.max_unsent_bytes); this response needs {bytes}",
                    self.in_use(),
                    self.max
                ),
                Some(1),
            )),
        }
    }

    /// Bytes held now.
    pub fn in_use(&self) -> usize {
        self.max - self.bytes.available_permits()
    }

    /// The budget in bytes.
    pub fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_refused_beyond_the_budget_and_given_back_on_drop() {
        let budget = UnsentBudget::new(100);
        let a = budget.reserve(60).unwrap();
        assert_eq!(budget.in_use(), 60);
        let err = budget.reserve(41).unwrap_err();
        assert_eq!(err.status(), 503);
        assert_eq!(
            err.message,
            "busy: 60 of 100 bytes of responses are waiting for clients to take them \
             (server.max_unsent_bytes); this response needs 41"
        );
        assert!(
            budget.reserve_leaving(30, 20).is_err(),
            "would leave 10 of 20"
        );
        let b = budget.reserve_leaving(30, 10).unwrap();
        let c = budget.reserve(10).unwrap();
        drop(a);
        assert_eq!(budget.in_use(), 40);
        drop((b, c));
        assert_eq!(budget.in_use(), 0);
    }
}
