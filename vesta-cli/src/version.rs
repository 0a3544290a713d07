//! What `vesta --version` says: the version, the git commit it was built from (when built from
//! a checkout; see build.rs), and the defaults in force when no config says otherwise — the
//! epoch, the default type and both layouts with their capacity and end of life — so a bug
//! report or an audit has them in one line each.

use std::fmt::Write;
use std::sync::OnceLock;

use vesta_core::{Epoch, IdType, MachinePools};
use vesta_embed::IssuerConfig;

/// `-V`: the version and the commit.
pub fn short() -> &'static str {
    static SHORT: OnceLock<String> = OnceLock::new();
    SHORT.get_or_init(|| format!("{} ({})", env!("CARGO_PKG_VERSION"), commit()))
}

/// `--version`: [`short`] plus the defaults in force.
pub fn long() -> &'static str {
    static LONG: OnceLock<String> = OnceLock::new();
    LONG.get_or_init(|| {
        let d = IssuerConfig::default();
        let epoch = d.layout().map_or(Epoch::VESTA, |l| l.epoch());
        let mut s = format!("{}\ncommit   {}\n", env!("CARGO_PKG_VERSION"), commit());
        let _ = writeln!(
            s,
            "defaults layout vesta, epoch {} ({} ms{}), type {}, version bit {}, server pool \
             {}..=1023, end-of-life margin {} days",
            Epoch::rfc3339(epoch.unix_ms()),
            epoch.unix_ms(),
            if epoch == Epoch::VESTA {
                ", Vesta's"
            } else {
                ""
            },
            d.id.id_type.unwrap_or(IdType::MaxPeak),
            d.id.version.unwrap_or(0),
            MachinePools::DEFAULT_SERVER_START,
            d.id.end_of_life_margin_days,
        );
        for id_type in IdType::ALL {
            let l = id_type.layout();
            let _ = writeln!(
                s,
                "layout   type {} {}: 1 {} units, time {} bits, seq {} bits, {} IDs/s per \
                 machine, end of life {}",
                id_type.code(),
                id_type,
                l.unit_name(),
                l.time_bits(),
                l.seq_bits(),
                l.capacity_per_second(),
                Epoch::rfc3339(l.with_epoch(epoch).end_of_life_ms()),
            );
        }
        let presets: Vec<&str> = vesta_core::Preset::ALL.iter().map(|p| p.name()).collect();
        let _ = writeln!(s, "layouts  {}, custom ([id.layout])", presets.join(", "));
        let _ = writeln!(s, "features {}", features());
        s.trim_end().to_owned()
    })
}

/// The cargo features this binary was built with: which commands and flags it has.
fn features() -> String {
    let built = [
        ("client", cfg!(feature = "client")),
        ("leases", cfg!(feature = "leases")),
        ("segment", cfg!(feature = "segment")),
        ("seq", cfg!(feature = "seq")),
        ("serve", cfg!(feature = "serve")),
        ("bench", cfg!(feature = "bench")),
    ];
    let on: Vec<&str> = built.iter().filter(|f| f.1).map(|f| f.0).collect();
    if on.is_empty() {
        "none (the embedded issuer's commands alone)".to_owned()
    } else {
        on.join(", ")
    }
}

/// The commit, or why there is none.
fn commit() -> &'static str {
    option_env!("VESTA_GIT_COMMIT").unwrap_or("commit unknown: not built from a git checkout")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_version_names_the_version_the_defaults_and_both_layouts() {
        let long = long();
        assert!(long.starts_with(env!("CARGO_PKG_VERSION")), "{long}");
        assert!(long.contains("epoch 2014-12-31T16:00:00.000Z (1420041600000 ms, Vesta's)"));
        assert!(long.contains("type max-peak"), "{long}");
        assert!(
            long.contains(
                "layouts  vesta, leaf, twitter, sonyflake, sonyflake-v2, uid-generator, custom"
            ),
            "{long}"
        );
        let features = if cfg!(feature = "serve") {
            "features client, leases, segment, seq, serve"
        } else {
            "features "
        };
        assert!(long.contains(features), "{long}");
        for id_type in IdType::ALL {
            let l = id_type.layout();
            let end = Epoch::rfc3339(l.end_of_life_ms());
            assert!(long.contains(&format!("{} IDs/s", l.capacity_per_second())));
            assert!(long.contains(&format!("end of life {end}")), "{long}");
        }
    }

    /// Built from this checkout (as here), the commit is HEAD's; built from a tarball, the line
    /// says there is none.
    #[test]
    fn the_commit_is_the_checkouts_head_when_there_is_one() {
        let workspace = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let head = std::process::Command::new("git")
            .args(["-C", workspace, "rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        match (head, option_env!("VESTA_GIT_COMMIT")) {
            (Some(head), Some(built)) => assert_eq!(built, head),
            (None, None) => assert!(short().contains("not built from a git checkout")),
            (head, built) => panic!("checkout HEAD {head:?} but built with {built:?}"),
        }
    }
}
