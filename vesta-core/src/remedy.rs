//! What an operator can do about a refusal, as data ([`Remedy`]): retire a machine ID's mark in
//! its store, retire a state file or this host's hold record, create the segment table, raise a
//! tag; ask the server that owns a per-key sequence table, record how the table is served, raise
//! a table that went back, give a server a sequence database, turn its console on. The
//! libraries' errors carry one as a field and say it in words; a program that has a way to run
//! it — the `vesta` binary, which spells each as its command line — installs a renderer once ([`Remedy::set_renderer`]), and from then on every message of the process that
//! names a remedy (a command's error, a server's start refusal, its log lines, `/healthz`, the
//! console) says it that way. The flags live in that program alone.
//!
//! It lives here, below every crate whose errors name one (vesta-segment, vesta-embed,
//! vesta-seq, vesta-service), as data with no I/O.

use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Where a registry keeps machine IDs' claims and marks: the store a [`Remedy`] acts on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MarkStore {
    /// An SQL database's `vesta_machine` table.
    Sql {
        /// The database URL as shown (its password hidden).
        db: String,
        /// The leases' scope in the table.
        scope: String,
    },
    /// etcd v3.
    Etcd {
        /// The client URLs, comma-separated as configured.
        endpoints: String,
        /// The key prefix of the leases.
        root: String,
    },
    /// ZooKeeper.
    ZooKeeper {
        /// The connect string, `host:port[,host:port...]`.
        connect: String,
        /// The root znode of the leases.
        root: String,
    },
}

impl fmt::Display for MarkStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarkStore::Sql { db, scope } => {
                write!(f, "the SQL table vesta_machine at {db}, scope {scope:?}")
            }
            MarkStore::Etcd { endpoints, root } => write!(f, "etcd {endpoints} under {root}"),
            MarkStore::ZooKeeper { connect, root } => {
                write!(f, "ZooKeeper {connect} under {root}")
            }
        }
    }
}

/// What an operator can do about a refusal. `Display` says it in words (no command line), or
/// as the renderer installed with [`Remedy::set_renderer`] says it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Remedy {
    /// Retire `machine`'s mark in `store`, so that its next holder starts as if none had been
    /// left (after a layout or epoch change).
    RetireMark {
        /// The machine ID.
        machine: u64,
        /// Where its mark is.
        store: MarkStore,
    },
    /// List who holds which machine ID in `store`.
    ListHolders {
        /// The registry.
        store: MarkStore,
    },
    /// Retire a static machine ID's state file (it is kept, renamed).
    RetireStateFile {
        /// The file.
        path: PathBuf,
    },
    /// Retire this host's hold record of a static machine ID: what its last holders counted
    /// in is forgotten.
    RetireHostHold {
        /// The record.
        path: PathBuf,
    },
    /// Create the segment table `leaf_alloc` in a database.
    CreateSegmentTable {
        /// The database URL as shown (its password hidden).
        db: String,
    },
    /// Raise a tag's `max_id` to a number at least `at_least`, past every number issued.
    RaiseTag {
        /// The tag.
        tag: String,
        /// The lowest number it may be raised to.
        at_least: u64,
        /// The database URL as shown (its password hidden).
        db: String,
    },
    /// Another process serves the per-key sequence table `vesta_seq` at `db` (one owner per
    /// table): ask it for numbers instead, or stop it first; the table's mode shows who.
    AskSeqOwner {
        /// The database URL as shown (its password hidden).
        db: String,
    },
    /// Record `mode` as how the per-key sequence table at `db` is served, once nothing serves
    /// it the recorded way any more.
    SetSeqMode {
        /// The database URL as shown (its password hidden).
        db: String,
        /// The mode as the table records it: `standalone`, `cluster sql`, `cluster etcd` or
        /// `cluster zookeeper`.
        mode: String,
    },
    /// Raise the per-key sequence table at `db`, which went back (restored from a backup),
    /// above every number handed out: to what this host (or the cluster's etcd or ZooKeeper)
    /// remembers raising it to, or by a margin where nothing remembers it.
    RaiseSeqTable {
        /// The database URL as shown (its password hidden).
        db: String,
    },
    /// Give the server a sequence database (its config's `[seq] db`), to serve per-key
    /// sequences.
    ServeSequences,
    /// Turn the server's web console on (its config's `[server] console`), to serve the pages
    /// under `/ui`.
    ServeConsole,
}

/// How a program says a remedy: `None` leaves it to the words.
pub type RemedyRenderer = fn(&Remedy) -> Option<String>;

/// The renderer installed for this process, if any.
static RENDERER: OnceLock<RemedyRenderer> = OnceLock::new();

impl Remedy {
    /// Installs how this process says a remedy (the `vesta` binary: the command line to run),
    /// once, before anything can fail; a later call changes nothing and returns false.
    pub fn set_renderer(renderer: RemedyRenderer) -> bool {
        RENDERER.set(renderer).is_ok()
    }

    /// The remedy in words, whatever renderer is installed.
    pub fn words(&self) -> Words<'_> {
        Words(self)
    }
}

impl fmt::Display for Remedy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match RENDERER.get().and_then(|render| render(self)) {
            Some(rendered) => f.write_str(&rendered),
            None => self.words().fmt(f),
        }
    }
}

/// A [`Remedy`] said in words ([`Remedy::words`]).
#[derive(Clone, Copy, Debug)]
pub struct Words<'a>(&'a Remedy);

impl fmt::Display for Words<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Remedy::RetireMark { machine, store } => {
                write!(f, "retire machine {machine}'s mark in {store}")
            }
            Remedy::ListHolders { store } => {
                write!(f, "list who holds which machine ID in {store}")
            }
            Remedy::RetireStateFile { path } => {
                write!(f, "retire the state file {}", path.display())
            }
            Remedy::RetireHostHold { path } => {
                write!(f, "retire this host's hold record {}", path.display())
            }
            Remedy::CreateSegmentTable { db } => write!(f, "create table leaf_alloc at {db}"),
            Remedy::RaiseTag { tag, at_least, db } => write!(
                f,
                "raise tag {tag:?} in leaf_alloc at {db} to a number N >= {at_least}"
            ),
            Remedy::AskSeqOwner { db } => write!(
                f,
                "ask it instead, or stop it first (the mode of vesta_seq at {db} shows who \
                 serves it)"
            ),
            Remedy::SetSeqMode { db, mode } => write!(
                f,
                "if nothing serves it that way any more, record {mode:?} as the mode of \
                 vesta_seq at {db}"
            ),
            Remedy::RaiseSeqTable { db } => write!(
                f,
                "raise vesta_seq at {db} back above every number handed out: to what this host \
                 (or the cluster's etcd or ZooKeeper) remembers, or by N where nothing remembers \
                 it (docs/seq.md, \"A restored table\")"
            ),
            Remedy::ServeSequences => f.write_str("[seq] db in its config"),
            Remedy::ServeConsole => f.write_str("[server] console = true in its config"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_remedy_is_said_in_words_naming_its_store() {
        let sql = MarkStore::Sql {
            db: "postgres://vesta:***@db1:5432/ids".into(),
            scope: "prod".into(),
        };
        let cases = [
            (
                Remedy::RetireMark {
                    machine: 5,
                    store: sql.clone(),
                },
                "retire machine 5's mark in the SQL table vesta_machine at \
                 postgres://vesta:***@db1:5432/ids, scope \"prod\"",
            ),
            (
                Remedy::ListHolders {
                    store: MarkStore::Etcd {
                        endpoints: "http://e1:2379,http://e2:2379".into(),
                        root: "/vesta/a".into(),
                    },
                },
                "list who holds which machine ID in etcd http://e1:2379,http://e2:2379 under \
                 /vesta/a",
            ),
            (
                Remedy::RetireMark {
                    machine: 930,
                    store: MarkStore::ZooKeeper {
                        connect: "z1:2181".into(),
                        root: "/vesta/b".into(),
                    },
                },
                "retire machine 930's mark in ZooKeeper z1:2181 under /vesta/b",
            ),
            (
                Remedy::RetireStateFile {
                    path: "/var/lib/vesta/m5.state".into(),
                },
                "retire the state file /var/lib/vesta/m5.state",
            ),
            (
                Remedy::RetireHostHold {
                    path: "/var/lib/vesta/holds/x".into(),
                },
                "retire this host's hold record /var/lib/vesta/holds/x",
            ),
            (
                Remedy::CreateSegmentTable {
                    db: "sqlite:///tmp/l.db".into(),
                },
                "create table leaf_alloc at sqlite:///tmp/l.db",
            ),
            (
                Remedy::RaiseTag {
                    tag: "orders".into(),
                    at_least: 251,
                    db: "sqlite:///tmp/l.db".into(),
                },
                "raise tag \"orders\" in leaf_alloc at sqlite:///tmp/l.db to a number N >= 251",
            ),
            (
                Remedy::AskSeqOwner {
                    db: "sqlite:///tmp/s.db".into(),
                },
                "ask it instead, or stop it first (the mode of vesta_seq at sqlite:///tmp/s.db \
                 shows who serves it)",
            ),
            (
                Remedy::SetSeqMode {
                    db: "sqlite:///tmp/s.db".into(),
                    mode: "cluster etcd".into(),
                },
                "if nothing serves it that way any more, record \"cluster etcd\" as the mode of \
                 vesta_seq at sqlite:///tmp/s.db",
            ),
            (
                Remedy::RaiseSeqTable {
                    db: "sqlite:///tmp/s.db".into(),
                },
                "raise vesta_seq at sqlite:///tmp/s.db back above every number handed out: to \
                 what this host (or the cluster's etcd or ZooKeeper) remembers, or by N where \
                 nothing remembers it (docs/seq.md, \"A restored table\")",
            ),
            (Remedy::ServeSequences, "[seq] db in its config"),
            (
                Remedy::ServeConsole,
                "[server] console = true in its config",
            ),
        ];
        for (remedy, words) in cases {
            assert_eq!(remedy.words().to_string(), words);
            // No renderer is installed in this test process: Display is the words.
            assert_eq!(remedy.to_string(), words);
            assert!(!words.contains("--"), "{words}");
        }
    }
}
