//! Shutdown signalling for both servers: [`signal`] resolves on SIGINT or SIGTERM, and one
//! [`Trigger`] tells every connection to stop reading and drain, like mini-redis's `Shutdown`. A
//! watch channel, so a connection that subscribes after the signal still sees it.

use tokio::sync::watch;

/// Fires the shutdown of everything subscribed to it.
#[derive(Debug)]
pub struct Trigger {
    tx: watch::Sender<bool>,
}

impl Trigger {
    /// A new, unfired trigger.
    pub fn new() -> Self {
        Trigger {
            tx: watch::Sender::new(false),
        }
    }

    /// A listener for this trigger.
    pub fn subscribe(&self) -> Shutdown {
        Shutdown {
            rx: self.tx.subscribe(),
        }
    }

    /// Fires it: every listener's [`Shutdown::recv`] returns.
    pub fn fire(&self) {
        self.tx.send_replace(true);
    }
}

impl Default for Trigger {
    fn default() -> Self {
        Self::new()
    }
}

/// Listens for the shutdown signal.
#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

impl Shutdown {
    /// True once the signal fired.
    pub fn is_shutdown(&self) -> bool {
        *self.rx.borrow()
    }

    /// Waits for the signal (returns at once if it already fired, or if the trigger is gone).
    pub async fn recv(&mut self) {
        let _ = self.rx.wait_for(|fired| *fired).await;
    }
}

/// Like [`signal`], but the handlers are installed at the call, not at the first poll: a
/// SIGTERM that arrives between the call and the moment the server starts waiting (systemd may
/// send one right after `READY=1`) is kept and stops the server gracefully, instead of killing
/// the process by the default action. Call it within the runtime, before starting the server.
pub fn installed() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal as unix_signal};
        let term = unix_signal(SignalKind::terminate());
        let int = unix_signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                    _ = int.recv() => tracing::info!("ctrl-c: shutting down"),
                },
                (Ok(mut term), Err(e)) => {
                    tracing::warn!("cannot listen for ctrl-c: {e}");
                    term.recv().await;
                }
                (Err(e), Ok(mut int)) => {
                    tracing::warn!("cannot listen for SIGTERM: {e}");
                    int.recv().await;
                }
                (Err(e), Err(_)) => {
                    tracing::warn!("cannot listen for SIGTERM or ctrl-c: {e}");
                    std::future::pending::<()>().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        signal()
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM, whichever comes first, and logs which. If a handler
/// cannot be installed, that signal is logged and ignored (the other still works); it never
/// resolves spuriously.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn late_subscribers_see_the_signal() {
        let t = Trigger::new();
        let mut early = t.subscribe();
        assert!(!early.is_shutdown());
        t.fire();
        early.recv().await;
        let mut late = t.subscribe();
        assert!(late.is_shutdown());
        late.recv().await;
    }
}
