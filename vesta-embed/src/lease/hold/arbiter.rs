//! The host's arbiter of who holds what: a name that one live process at a time can claim,
//! released by the kernel when that process ends, however it ends, and that no file tidy-up
//! can take away.
//!
//! On Linux a claim is a Unix socket bound to an abstract name (`vesta-rs/...`, no file behind
//! it): deleting files — a tmpfs tidy-up, systemd-logind's `RemoveIPC` at logout, an operator's
//! `rm` — cannot free it, and every process of the host's network namespace sees it whatever
//! its user, mount namespace or private `/tmp` (the shipped units' `DynamicUser`, `PrivateTmp`
//! and `PrivateDevices` included). A refusal names the holder from the socket's peer
//! credentials. Elsewhere a claim is an exclusive lock on a file in the hold directory, which
//! deleting the file while its holder runs would free: there the directory must not be tidied.
//!
//! Machine-ID holds are claimed in the host's namespace, or, with `VESTA_HOLD_DIR` set, in one
//! of that directory's own (a test harness playing several hosts on one); a state file's claims
//! are the file's own and in no such namespace.

use std::time::{Duration, Instant};

#[cfg(not(target_os = "linux"))]
use super::lock_file::LockFile;
use super::lock_file::POLL;
use crate::error::StartError;

/// A claimed name, held for as long as this value lives.
#[derive(Debug)]
pub(crate) struct Claim {
    #[cfg(target_os = "linux")]
    _socket: std::os::unix::net::UnixListener,
    #[cfg(not(target_os = "linux"))]
    _file: LockFile,
}

/// The namespace of machine-ID holds, the prefix of their names: the host's, or
/// `VESTA_HOLD_DIR`'s own.
pub(crate) fn hold_namespace() -> String {
    namespace_of(
        std::env::var_os("VESTA_HOLD_DIR")
            .filter(|d| !d.is_empty())
            .as_deref()
            .map(std::path::Path::new),
    )
}

/// The namespace of the hold directory `dir` (`None`: the host's). Keyed by the directory, not
/// by how it was spelled: `holds`, `holds/`, `./holds` and a symlink to it are one directory,
/// so one host — keyed by the spelling, two processes naming one directory two ways held one
/// machine ID at once. Its resolved path, not its inode: a directory deleted and made again
/// while a holder runs stays the same host.
fn namespace_of(dir: Option<&std::path::Path>) -> String {
    let Some(dir) = dir else {
        return "vesta-rs".into();
    };
    // Made before any claim (`HoldPlace::host`); a directory that is not there holds nothing.
    let resolved = std::fs::canonicalize(dir)
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_owned());
    format!(
        "vesta-rs/ns-{:016x}",
        crate::lease::counted_in::fnv1a(resolved.as_os_str().as_encoded_bytes())
    )
}

/// The name `what` in the host's namespace whatever the environment (a state file's claims).
pub(crate) fn on_host(what: &str) -> String {
    format!("vesta-rs/{what}")
}

/// Claims every one of `names` or none, trying again for at most `wait` while another process
/// holds one of them. Still held after `wait`: `Ok(Err(holder))`.
pub(crate) fn claim_all(
    names: &[String],
    wait: Duration,
) -> Result<Result<Vec<Claim>, String>, StartError> {
    let deadline = Instant::now() + wait;
    loop {
        let mut claims = Vec::with_capacity(names.len());
        let mut held = None;
        for name in names {
            match try_claim(name)? {
                Ok(claim) => claims.push(claim),
                Err(holder) => {
                    held = Some(holder);
                    break;
                }
            }
        }
        let Some(holder) = held else {
            return Ok(Ok(claims));
        };
        // All or none: let go of the part held, so two starts never block each other.
        drop(claims);
        let now = Instant::now();
        if now >= deadline {
            return Ok(Err(holder));
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

/// A claim another crate takes on what it guards (vesta-seq: a table it serves), in the host's
/// hold namespace (`VESTA_HOLD_DIR`'s own when set), released by the kernel when the process
/// ends however it ends.
#[derive(Debug)]
pub struct HostClaim {
    _claim: Claim,
}

impl HostClaim {
    /// Claims `what` now (`seq/<table>`), or says who holds it (`pid N (uid U: command)`).
    pub fn try_take(what: &str) -> Result<Result<HostClaim, String>, StartError> {
        let name = format!("{}/{what}", hold_namespace());
        Ok(try_claim(&name)?.map(|claim| HostClaim { _claim: claim }))
    }
}

/// The name of the arbiter that decides this process's claims: the kernel's boot, its network
/// namespace and the hold namespace, hashed. A holder recorded elsewhere (a database row) with
/// this name held a claim this host's kernel decides, so a free claim means it is gone. `None`
/// where claims are lock files (not Linux), which a tidy-up could free.
pub fn arbiter_name() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let net = std::fs::read_link("/proc/self/ns/net").ok()?;
    let id = format!("{}|{}|{}", boot.trim(), net.display(), hold_namespace());
    Some(format!(
        "{:016x}",
        crate::lease::counted_in::fnv1a(id.as_bytes())
    ))
}

/// Claims `name` now, or says who holds it.
#[cfg(target_os = "linux")]
pub(crate) fn try_claim(name: &str) -> Result<Result<Claim, String>, StartError> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let failed = |e: std::io::Error| StartError::Lease(format!("cannot claim {name}: {e}"));
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).map_err(failed)?;
    match UnixListener::bind_addr(&addr) {
        Ok(socket) => Ok(Ok(Claim { _socket: socket })),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Ok(Err(holder_of(name))),
        Err(e) => Err(failed(e)),
    }
}

/// Who holds the abstract name `name`: the peer credentials of its listening socket, asked
/// without blocking (a holder never accepts; a full backlog only loses the name).
#[cfg(target_os = "linux")]
fn holder_of(name: &str) -> String {
    use rustix::net::{
        AddressFamily, SocketAddrUnix, SocketFlags, SocketType, connect, socket_with,
        sockopt::socket_peercred,
    };
    let asked = (|| {
        let fd = socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )
        .ok()?;
        connect(
            &fd,
            &SocketAddrUnix::new_abstract_name(name.as_bytes()).ok()?,
        )
        .ok()?;
        socket_peercred(&fd).ok()
    })();
    let Some(cred) = asked else {
        return "another process".into();
    };
    let pid = cred.pid.as_raw_pid();
    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|raw| {
            let words: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            let line = words.join(" ");
            match line.char_indices().nth(80) {
                Some((cut, _)) => format!("{}...", &line[..cut]),
                None => line,
            }
        })
        .filter(|l| !l.is_empty());
    match command {
        Some(command) => format!("pid {pid} (uid {}: {command})", cred.uid.as_raw()),
        None => format!("pid {pid} (uid {})", cred.uid.as_raw()),
    }
}

/// Claims `name` now, or says who holds it: a lock file in the hold directory.
#[cfg(not(target_os = "linux"))]
pub(crate) fn try_claim(name: &str) -> Result<Result<Claim, String>, StartError> {
    let file_name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = super::memory::hold_dir()?.join(format!("{file_name}.lock"));
    match LockFile::acquire(&path, true, Duration::ZERO)? {
        Ok(mut file) => {
            file.rewrite(
                &format!("holder = {:?}\n", super::lock_file::holder_line()),
                false,
            )?;
            Ok(Ok(Claim { _file: file }))
        }
        Err(holder) => Ok(Err(holder)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_has_one_claim_at_a_time_and_the_refusal_names_its_holder() {
        let name = on_host(&format!("test/{}/{:?}", std::process::id(), Instant::now()));
        let first = try_claim(&name).unwrap().unwrap();
        let holder = try_claim(&name).unwrap().unwrap_err();
        if cfg!(target_os = "linux") {
            assert!(
                holder.starts_with(&format!("pid {} (uid ", std::process::id())),
                "{holder}"
            );
        }
        drop(first);
        let again = try_claim(&name).unwrap().unwrap();
        // All or none: one held name leaves the others free.
        let other = on_host(&format!("test/{}/other", std::process::id()));
        let names = [other.clone(), name.clone()];
        assert!(claim_all(&names, Duration::ZERO).unwrap().is_err());
        drop(try_claim(&other).unwrap().unwrap());
        drop(again);
        assert_eq!(claim_all(&names, Duration::ZERO).unwrap().unwrap().len(), 2);
    }

    #[cfg(unix)]
    #[test]
    fn a_hold_directory_is_one_namespace_however_it_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let holds = dir.path().join("holds");
        std::fs::create_dir(&holds).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&holds, &link).unwrap();
        let ns = namespace_of(Some(holds.as_path()));
        let slash = std::path::PathBuf::from(format!("{}/", holds.display()));
        for other in [slash, link, dir.path().join("sub/../holds")] {
            assert_eq!(
                namespace_of(Some(other.as_path())),
                ns,
                "{}",
                other.display()
            );
        }
        assert_ne!(namespace_of(Some(dir.path())), ns);
        assert_ne!(namespace_of(None), ns);
        // Deleted and made again: the same directory to every process that names it.
        std::fs::remove_dir(&holds).unwrap();
        std::fs::create_dir(&holds).unwrap();
        assert_eq!(namespace_of(Some(holds.as_path())), ns);
    }

    #[test]
    fn a_waiting_claim_gets_the_name_once_it_is_let_go() {
        let name = on_host(&format!("test/{}/wait", std::process::id()));
        let held = try_claim(&name).unwrap().unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        let names = [name];
        claim_all(&names, Duration::from_secs(10)).unwrap().unwrap();
        releaser.join().unwrap();
    }
}
