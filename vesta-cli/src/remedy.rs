//! The one place that spells a remedy as the `vesta` command line to run. The libraries return
//! remedies as data ([`Remedy`], carried by their errors) and say them in words; [`install`],
//! called first thing in `main`, makes every message of this process say them as commands
//! instead: a command's error line, `vesta serve`'s start refusal and its log lines (text or
//! JSON), `/healthz` and the console's pages. The flags live here and in the commands that
//! take them, nowhere else (`tests/library_sources.rs` checks the libraries).

use std::borrow::Cow;

use vesta_core::{MarkStore, Remedy};

/// Makes this process say every remedy as its command line (once; later calls do nothing).
pub fn install() {
    Remedy::set_renderer(command);
}

/// The command that carries out `remedy`; `None` for one this build cannot spell (said in
/// words then).
pub fn command(remedy: &Remedy) -> Option<String> {
    Some(match remedy {
        Remedy::RetireMark { machine, store } => {
            format!("vesta machine retire {machine} {}", store_flags(store))
        }
        Remedy::ListHolders { store } => format!("vesta machine ls {}", store_flags(store)),
        Remedy::RetireStateFile { path } => format!(
            "vesta machine retire --state-file {}",
            word(&path.to_string_lossy())
        ),
        Remedy::RetireHostHold { path } => format!(
            "vesta machine retire --host-hold {}",
            word(&path.to_string_lossy())
        ),
        Remedy::CreateSegmentTable { db } => format!("vesta segment init --db {}", word(db)),
        // N is the operator's to choose (other servers may have issued past this one's floor).
        Remedy::RaiseTag { tag, at_least, db } => format!(
            "vesta segment raise {} --to N --db {} (N >= {at_least})",
            word(tag),
            word(db)
        ),
        Remedy::AskSeqOwner { db } => format!(
            "ask it instead (vesta seq next KEY --server HOST:PORT for a TCP server, GET \
             /seq/KEY for a REST one) or stop it first; vesta seq mode --db {} shows who serves \
             the table",
            word(db)
        ),
        Remedy::SetSeqMode { db, mode } => format!(
            "if nothing serves it that way any more, record this one: vesta seq mode --db {} \
             --set {}",
            word(db),
            word(mode)
        ),
        Remedy::RaiseSeqTable { db } => format!(
            "to recover: vesta seq raise --db {db} (to what this host remembers; add --config \
             FILE for a cluster in etcd or ZooKeeper), or vesta seq raise --db {db} --by N where \
             nothing remembers it (docs/seq.md, \"A restored table\")",
            db = word(db)
        ),
        Remedy::ServeSequences => {
            "[seq] db in its config, or vesta serve rest|tcp --seq-db URL".into()
        }
        Remedy::ServeConsole => {
            "[server] console = true in its config, or vesta serve rest|tcp --console".into()
        }
        _ => return None,
    })
}

/// The flags that name a lease store, as `vesta machine ls` and `retire` take them.
fn store_flags(store: &MarkStore) -> String {
    match store {
        MarkStore::Sql { db, scope } => {
            format!("--machine-db {} --scope {}", word(db), word(scope))
        }
        MarkStore::Etcd { endpoints, root } => {
            format!("--etcd {} --root {}", word(endpoints), word(root))
        }
        MarkStore::ZooKeeper { connect, root } => {
            format!("--zk {} --root {}", word(connect), word(root))
        }
        // A store this build does not know: the words name it.
        other => format!("(in {other})"),
    }
}

/// One shell word: as it is when it has nothing a shell would read otherwise, else in single
/// quotes (a hidden password's `***`, a URL's `?`, a path with a space).
fn word(text: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(format!("'{}'", text.replace('\'', r"'\''")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(db: &str) -> MarkStore {
        MarkStore::Sql {
            db: db.into(),
            scope: "prod".into(),
        }
    }

    #[test]
    fn each_remedy_is_the_command_a_user_runs() {
        let cases = [
            (
                Remedy::RetireMark {
                    machine: 5,
                    store: sql("postgres://vesta@db1:5432/ids"),
                },
                "vesta machine retire 5 --machine-db postgres://vesta@db1:5432/ids --scope prod",
            ),
            (
                Remedy::RetireMark {
                    machine: 0,
                    store: MarkStore::Etcd {
                        endpoints: "http://e1:2379,http://e2:2379".into(),
                        root: "/vesta/epochs".into(),
                    },
                },
                "vesta machine retire 0 --etcd http://e1:2379,http://e2:2379 --root /vesta/epochs",
            ),
            (
                Remedy::RetireMark {
                    machine: 930,
                    store: MarkStore::ZooKeeper {
                        connect: "z1:2181,z2:2181".into(),
                        root: "/vesta/default".into(),
                    },
                },
                "vesta machine retire 930 --zk z1:2181,z2:2181 --root /vesta/default",
            ),
            (
                Remedy::ListHolders {
                    store: sql("sqlite:///var/lib/vesta/m.db"),
                },
                "vesta machine ls --machine-db sqlite:///var/lib/vesta/m.db --scope prod",
            ),
            (
                Remedy::RetireStateFile {
                    path: "/var/lib/vesta/m5.state".into(),
                },
                "vesta machine retire --state-file /var/lib/vesta/m5.state",
            ),
            (
                Remedy::RetireHostHold {
                    path: "/var/lib/vesta/holds/vesta-rs.node0-9.m5.hold".into(),
                },
                "vesta machine retire --host-hold /var/lib/vesta/holds/vesta-rs.node0-9.m5.hold",
            ),
            (
                Remedy::CreateSegmentTable {
                    db: "mysql://leaf@db1:3306/leaf".into(),
                },
                "vesta segment init --db mysql://leaf@db1:3306/leaf",
            ),
            (
                Remedy::RaiseTag {
                    tag: "orders".into(),
                    at_least: 251,
                    db: "sqlite:///tmp/l.db".into(),
                },
                "vesta segment raise orders --to N --db sqlite:///tmp/l.db (N >= 251)",
            ),
            (
                Remedy::AskSeqOwner {
                    db: "sqlite:///tmp/s.db".into(),
                },
                "ask it instead (vesta seq next KEY --server HOST:PORT for a TCP server, GET \
                 /seq/KEY for a REST one) or stop it first; vesta seq mode --db \
                 sqlite:///tmp/s.db shows who serves the table",
            ),
            (
                Remedy::SetSeqMode {
                    db: "sqlite:///tmp/s.db".into(),
                    mode: "cluster etcd".into(),
                },
                "if nothing serves it that way any more, record this one: vesta seq mode --db \
                 sqlite:///tmp/s.db --set 'cluster etcd'",
            ),
            (
                Remedy::RaiseSeqTable {
                    db: "postgres://vesta:***@db1/ids".into(),
                },
                "to recover: vesta seq raise --db 'postgres://vesta:***@db1/ids' (to what this \
                 host remembers; add --config FILE for a cluster in etcd or ZooKeeper), or vesta \
                 seq raise --db 'postgres://vesta:***@db1/ids' --by N where nothing remembers it \
                 (docs/seq.md, \"A restored table\")",
            ),
            (
                Remedy::ServeSequences,
                "[seq] db in its config, or vesta serve rest|tcp --seq-db URL",
            ),
            (
                Remedy::ServeConsole,
                "[server] console = true in its config, or vesta serve rest|tcp --console",
            ),
        ];
        for (remedy, line) in cases {
            assert_eq!(command(&remedy).as_deref(), Some(line));
        }
    }

    #[test]
    fn a_word_a_shell_would_read_otherwise_is_quoted() {
        let hidden = Remedy::RetireMark {
            machine: 1,
            store: sql("postgres://vesta:***@db1/ids?sslmode=verify-full"),
        };
        assert_eq!(
            command(&hidden).unwrap(),
            "vesta machine retire 1 --machine-db 'postgres://vesta:***@db1/ids?sslmode=verify-full' \
             --scope prod"
        );
        let spaced = Remedy::RetireStateFile {
            path: "/home/a b/it's.state".into(),
        };
        assert_eq!(
            command(&spaced).unwrap(),
            r"vesta machine retire --state-file '/home/a b/it'\''s.state'"
        );
    }

    /// Installed, a remedy's `Display` (and so every error that names one) is the command.
    #[test]
    fn installed_every_message_says_the_command() {
        install();
        let remedy = Remedy::RetireStateFile {
            path: "/s.state".into(),
        };
        assert_eq!(
            remedy.to_string(),
            "vesta machine retire --state-file /s.state"
        );
        assert_eq!(remedy.words().to_string(), "retire the state file /s.state");
    }
}
