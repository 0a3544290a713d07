//! The shutdown signal: ctrl-c (SIGINT) or SIGTERM, whichever comes first. Serving stops
//! accepting, finishes the requests in flight and then drops the issuer, releasing its lease.

/// Resolves on SIGINT or SIGTERM. If a handler cannot be installed, that signal is logged and
/// ignored (the other still works); it never resolves spuriously.
pub async fn signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!("cannot listen for ctrl-c: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("ctrl-c: shutting down"),
        () = term => tracing::info!("SIGTERM: shutting down"),
    }
}
