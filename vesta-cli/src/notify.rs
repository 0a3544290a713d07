//! systemd's readiness protocol (`sd_notify`): with `Type=notify` the service manager waits for
//! `READY=1` (sent once the listener is bound and the machine ID held) before it counts the unit
//! as started, and learns of a stop under way from `STOPPING=1`. A datagram to the socket named
//! in `$NOTIFY_SOCKET`; nothing at all when it is unset (not under systemd). Ten lines, so no
//! crate.

/// Sends `state` (e.g. `"READY=1"`) to the service manager, if there is one. Best effort: a
/// failure is printed as a warning, never fatal — the server runs the same without a manager.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&path, state) {
        crate::cmd::common::say(&format!(
            "warning: could not notify the service manager ({}): {e}",
            state.lines().next().unwrap_or_default()
        ));
    }
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
