//! One machine ID of an issuer: its generator with the lease state, the lease thread that
//! keeps it (if any) and its hold on this host. An issuer of k machine IDs holds k of these,
//! each started, renewed, fenced and given back alone, exactly as a lone one is.

use std::sync::{Arc, Mutex, PoisonError};

use vesta_core::{Clock, GenError, Generator};

use super::LeaseThread;
use crate::error::{IssueError, ShutdownError};
use crate::lease::leased_generator::LeasedGenerator;
use crate::status::LeaseState;

/// A machine ID and what keeps it.
#[derive(Debug)]
pub(crate) struct Member<C: Clock + 'static> {
    /// The generator and its lease state, shared with the lease thread.
    pub(crate) leased: Arc<LeasedGenerator<C>>,
    /// The lease thread (a registry, or a static ID's state file), if any; taken by
    /// `shutdown`.
    lease_thread: Mutex<Option<LeaseThread>>,
    /// A static machine ID held on this host without a state file; let go by `shutdown`.
    #[cfg(feature = "state-file")]
    host_hold: Mutex<Option<super::start::HeldOnHost>>,
}

impl<C: Clock + 'static> Member<C> {
    /// A machine ID kept by `lease_thread`, or by nothing but (maybe) `host_hold`.
    pub(super) fn new(
        leased: Arc<LeasedGenerator<C>>,
        lease_thread: Option<LeaseThread>,
        #[cfg(feature = "state-file")] host_hold: Option<super::start::HeldOnHost>,
    ) -> Self {
        Member {
            leased,
            lease_thread: Mutex::new(lease_thread),
            #[cfg(feature = "state-file")]
            host_hold: Mutex::new(host_hold),
        }
    }

    /// The generator of this machine ID.
    #[inline]
    pub(crate) fn generator(&self) -> &Generator<C> {
        &self.leased.generator
    }

    /// Stops issuing with this machine ID and gives it back: with a lease, the final mark
    /// written and the claim deleted. Idempotent.
    pub(super) fn shutdown(&self) -> Result<(), ShutdownError> {
        let thread = self
            .lease_thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut thread) = thread {
            return thread.stop();
        }
        if self.leased.with_info(|info| info.state) == LeaseState::Static {
            self.leased
                .fence(LeaseState::Released, "the issuer was shut down");
        }
        #[cfg(feature = "state-file")]
        if let Some(held) = self
            .host_hold
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            held.release(&self.leased.generator)
                .map_err(|e| ShutdownError(e.to_string()))?;
        }
        Ok(())
    }

    /// What a caller is told when this machine ID's generator refused.
    #[cold]
    pub(crate) fn issue_error(&self, e: GenError) -> IssueError {
        match e {
            GenError::Fenced { .. } => IssueError::Unavailable(self.leased.refusal_reason()),
            other => IssueError::Refused(other),
        }
    }
}

impl<C: Clock + 'static> Drop for Member<C> {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!(
                error = %e,
                machine = self.leased.generator.machine(),
                "issuer dropped without a clean shutdown"
            );
        }
    }
}
