//! A TCP proxy on loopback that can fail like a network: `blackhole` (connections stay open,
//! every byte is dropped, nothing is answered — a partition, not a refusal) and `cut` (every
//! connection is closed and new ones are closed at once), then `heal`. For partition tests of
//! the lease stores.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::thread;
use std::time::Duration;

const PASS: u8 = 0;
const BLACKHOLE: u8 = 1;
const CUT: u8 = 2;

/// A running proxy; stopped (and every connection closed) on drop.
pub struct Proxy {
    addr: SocketAddr,
    mode: Arc<AtomicU8>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// Forwards a new loopback port to `target`.
    pub fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy bind");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let mode = Arc::new(AtomicU8::new(PASS));
        let stop = Arc::new(AtomicBool::new(false));
        let (m, st) = (mode.clone(), stop.clone());
        thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        if m.load(Ordering::Relaxed) == CUT {
                            let _ = client.shutdown(Shutdown::Both);
                            continue;
                        }
                        let Ok(server) = TcpStream::connect(target) else {
                            continue;
                        };
                        for (from, to) in [
                            (client.try_clone().unwrap(), server.try_clone().unwrap()),
                            (server, client),
                        ] {
                            let (m, st) = (m.clone(), st.clone());
                            thread::spawn(move || pump(from, to, &m, &st));
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(5));
                    }
                    Err(_) => return,
                }
            }
        });
        Proxy { addr, mode, stop }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Drops every byte from now on, both ways, keeping connections open.
    pub fn blackhole(&self) {
        self.mode.store(BLACKHOLE, Ordering::Relaxed);
    }

    /// Closes every connection, and new ones at once.
    pub fn cut(&self) {
        self.mode.store(CUT, Ordering::Relaxed);
    }

    /// Forwards again (connections cut meanwhile stay closed).
    pub fn heal(&self) {
        self.mode.store(PASS, Ordering::Relaxed);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies `from` to `to` while passing; drops the bytes in a blackhole; closes both when cut
/// or stopped.
fn pump(mut from: TcpStream, mut to: TcpStream, mode: &AtomicU8, stop: &AtomicBool) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        if stop.load(Ordering::Relaxed) || mode.load(Ordering::Relaxed) == CUT {
            break;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if mode.load(Ordering::Relaxed) == PASS && to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
