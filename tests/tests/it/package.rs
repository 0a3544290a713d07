//! The Debian package, as an operator meets it: `scripts/deb --dev` builds it (cargo-deb), and
//! on this machine it installs with dpkg, `vesta --version` runs from /usr/bin, both units pass
//! `systemd-analyze verify` where they were installed, the configs are conffiles (kept by a
//! remove, gone with a purge), the man pages and completions are in place, and the package
//! removes cleanly. Needs root (dpkg); skipped with a note otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "vesta"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("installed"))
}

/// Purges the package if a run before this one left it installed (it is ours: nothing else is
/// named `vesta` here).
fn purge() {
    let _ = Command::new("dpkg").args(["--purge", "vesta"]).output();
}

#[test]
fn the_deb_installs_runs_verifies_and_removes_cleanly() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: installing a .deb needs root (dpkg)");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let built = run(Command::new(root.join("scripts/deb")).arg("--dev"));
    let deb = PathBuf::from(text(&built).lines().last().unwrap().trim());
    let deb = if deb.is_absolute() {
        deb
    } else {
        root.join(deb)
    };
    assert!(deb.exists(), "{}", deb.display());

    purge();
    run(Command::new("dpkg").arg("-i").arg(&deb));
    assert!(installed());

    let version = text(&run(Command::new("/usr/bin/vesta").arg("--version")));
    assert_eq!(
        version.lines().next(),
        Some(format!("vesta {}", env!("CARGO_PKG_VERSION")).as_str()),
        "{version}"
    );
    for unit in ["vesta-rest.service", "vesta-tcp.service"] {
        let path = format!("/usr/lib/systemd/system/{unit}");
        let body = std::fs::read_to_string(&path).unwrap();
        assert!(
            body.contains("ExecStart=/usr/bin/vesta serve"),
            "{unit} runs the packaged binary"
        );
        if Path::new("/usr/bin/systemd-analyze").exists() {
            let out = Command::new("systemd-analyze")
                .args(["verify", &path])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{unit}: {stderr}");
        }
    }
    let conffiles = text(&run(Command::new("dpkg-query").args([
        "-W",
        "-f=${Conffiles}",
        "vesta",
    ])));
    for conf in ["/etc/vesta/rest.toml", "/etc/vesta/tcp.toml"] {
        assert!(
            conffiles.contains(conf),
            "{conf} is a conffile: {conffiles}"
        );
    }
    let files = text(&run(Command::new("dpkg").args(["-L", "vesta"])));
    for f in [
        "/usr/share/man/man1/vesta-serve-rest.1.gz",
        "/usr/share/bash-completion/completions/vesta",
        "/usr/share/doc/vesta/prometheus/vesta.rules.yml",
        "/usr/lib/tmpfiles.d/vesta.conf",
    ] {
        assert!(files.lines().any(|l| l == f), "{f} not in the package");
        assert!(Path::new(f).exists(), "{f} not installed");
    }

    // The host's hold records: a directory every user (and unit) writes, made at install.
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata("/var/lib/vesta/holds")
            .expect("/var/lib/vesta/holds made at install")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o1777, "{mode:o}");
    }

    // Remove: the program goes, the operator's configs stay; purge takes them too.
    run(Command::new("dpkg").args(["--remove", "vesta"]));
    assert!(!Path::new("/usr/bin/vesta").exists());
    assert!(!Path::new("/usr/lib/systemd/system/vesta-rest.service").exists());
    assert!(
        Path::new("/etc/vesta/rest.toml").exists(),
        "remove keeps conffiles"
    );
    run(Command::new("dpkg").args(["--purge", "vesta"]));
    assert!(!installed());
    assert!(
        !Path::new("/etc/vesta/rest.toml").exists(),
        "purge removes conffiles"
    );
}
