//! The embedded fallback: an [`Issuer`](vesta_embed::Issuer) with genMethod embed (machine ID from the embed pool),
//! used only when every server failed a whole round. It issues through the same async waiting
//! list as the servers ([`AsyncIssuer`]), so it never blocks a worker thread.

use vesta_core::{GenMethod, IdRun, Layout};
use vesta_embed::{AsyncIssuer, IssuerConfig};

use crate::error::ClientError;

/// The fallback issuer.
pub(crate) struct Fallback {
    ids: AsyncIssuer,
}

impl Fallback {
    /// Starts the issuer with genMethod embed, whatever `config.gen_method` says.
    pub(crate) async fn start(mut config: IssuerConfig) -> Result<Self, ClientError> {
        config.gen_method = GenMethod::Embed;
        let ids = AsyncIssuer::start(config)
            .await
            .map_err(|e| ClientError::Fallback(e.to_string()))?;
        Ok(Fallback { ids })
    }

    /// The layout (with its epoch) the fallback issues in: the servers' must be the same.
    pub(crate) fn layout(&self) -> Layout {
        self.ids.issuer().layout().clone()
    }

    /// One ID.
    pub(crate) async fn next_id(&self) -> Result<u64, ClientError> {
        self.ids
            .next_id()
            .await
            .map_err(|e| ClientError::Fallback(e.to_string()))
    }

    /// `n` IDs as runs.
    pub(crate) async fn next_ids(&self, n: u64) -> Result<Vec<IdRun>, ClientError> {
        let batch = self
            .ids
            .next_ids(n)
            .await
            .map_err(|e| ClientError::Fallback(e.to_string()))?;
        Ok(batch.runs().to_vec())
    }
}
