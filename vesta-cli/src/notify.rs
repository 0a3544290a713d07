//! systemd's readiness protocol (`sd_notify`): with `Type=notify` the service manager waits for
//! `READY=1` (sent once the listener is bound and the machine ID held) before it counts the unit
//! as started, learns of a stop under way from `STOPPING=1`, and with `WatchdogSec=` gets
//! `WATCHDOG=1` pings while the server's runtime runs. A datagram to the socket named
//! in `$NOTIFY_SOCKET`; nothing at all when it is unset (not under systemd). Ten lines, so no
//! crate.

/// Sends `state` (e.g. `"READY=1"`) to the service manager, if there is one. Best effort: a
/// failure is printed as a warning, never fatal — the server runs the same without a manager.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&path, state) {
        crate::cmd::serve_log::say(&format!(
            "warning: could not notify the service manager ({}): {e}",
            state.lines().next().unwrap_or_default()
        ));
    }
}

/// The watchdog's ping interval when the service manager asked for one (`WatchdogSec=` sets
/// `$WATCHDOG_USEC`, and `$WATCHDOG_PID` names this process): half the timeout, as systemd
/// advises.
pub fn watchdog_interval() -> Option<std::time::Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    (usec > 0).then(|| std::time::Duration::from_micros(usec / 2))
}

/// Pings the watchdog (`WATCHDOG=1`) every `interval` from a task on the server's runtime, so
/// the pings stop, and the service manager restarts the server, if that runtime stops making
/// progress. A fenced or starting issuer still pings: it recovers by itself, and its state is
/// what health, metrics and alerts are for.
pub fn spawn_watchdog(interval: std::time::Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            notify("WATCHDOG=1");
        }
    })
}

#[cfg(target_os = "linux")]
fn send(path: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};

    let bytes = path.as_bytes();
    // A leading '@' names a socket in the abstract namespace.
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name)?,
        None => SocketAddr::from_pathname(std::path::Path::new(path))?,
    };
    let socket = UnixDatagram::unbound()?;
    socket.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn send(_path: &std::ffi::OsStr, _state: &str) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_state_arrives_as_one_datagram() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), "READY=1\nSTATUS=serving").unwrap();
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving");
    }
}
