//! The embedded fallback: an [`Issuer`] with genMethod embed (machine ID from the embed pool),
//! used only when every server failed a whole round. Waits for the next time unit on a timer,
//! never by blocking a worker thread.

use std::time::Duration;

use tokio::time::sleep;
use vesta_core::{GenError, GenMethod, IdRun};
use vesta_embed::{IssueError, Issuer, IssuerConfig};

use crate::error::ClientError;

/// The fallback issuer.
pub(crate) struct Fallback {
    issuer: Issuer,
}

impl Fallback {
    /// Starts the issuer with genMethod embed, whatever `config.gen_method` says.
    pub(crate) async fn start(mut config: IssuerConfig) -> Result<Self, ClientError> {
        config.gen_method = GenMethod::Embed;
        let issuer = tokio::task::spawn_blocking(move || Issuer::start(config))
            .await
            .map_err(|e| ClientError::Fallback(e.to_string()))?
            .map_err(|e| ClientError::Fallback(e.to_string()))?;
        Ok(Fallback { issuer })
    }

    /// One ID.
    pub(crate) async fn next_id(&self) -> Result<u64, ClientError> {
        loop {
            match self.issuer.try_next_id() {
                Ok(id) => return Ok(id),
                Err(IssueError::Refused(GenError::WouldBlock { wait_ms, .. })) => {
                    sleep(Duration::from_millis(wait_ms.max(1))).await
                }
                Err(e) => return Err(ClientError::Fallback(e.to_string())),
            }
        }
    }

    /// `n` IDs as runs.
    pub(crate) async fn next_ids(&self, n: u64) -> Result<Vec<IdRun>, ClientError> {
        let mut runs = Vec::new();
        let mut left = n;
        while left > 0 {
            match self.issuer.try_next_ids(left) {
                Ok(b) => {
                    left -= b.len();
                    runs.extend_from_slice(b.runs());
                }
                Err(IssueError::Refused(GenError::WouldBlock { wait_ms, .. })) => {
                    sleep(Duration::from_millis(wait_ms.max(1))).await
                }
                Err(e) => return Err(ClientError::Fallback(e.to_string())),
            }
        }
        Ok(runs)
    }
}
