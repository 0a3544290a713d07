//! The libraries as a user's own project depends on them, outside this workspace (whose test
//! builds unify every feature through dev-dependencies): a scratch crate with
//! `vesta-embed = { default-features = false }` is built offline from the workspace's lock file,
//! run, and its dependency tree counted against the README's promise (under 25 crates); and
//! the README's first command's build, `vesta` without default features: it issues IDs, leaves
//! the servers' stack out of its tree, and says which feature a left-out command needs; and
//! vesta-seq with one database, whose tree has that driver alone.

use std::process::Command;

use vesta_core::{GenMethod, IdFields};
use vesta_tests::bin::{
    HOST_DEPS, UsersCrate, assert_not_in_tree, cargo, dependency_tree, fails_in_one_line,
    host_target_profile_dir, host_triple, run_printing_ids, state_home,
};

/// What the scratch crate does: a static issuer from the builder (no config files, no tokio),
/// three IDs, and a state file refused naming the feature it needs.
const MAIN_RS: &str = r#"
use vesta_embed::{Issuer, IssuerConfig};

fn main() {
    let config = IssuerConfig::builder().machine(3).build().expect("config");
    let issuer = Issuer::start(config).expect("start");
    for _ in 0..3 {
        println!("id {}", issuer.next_id().expect("id"));
    }
    let refused = IssuerConfig::builder()
        .machine(3)
        .state_file("/tmp/never-written.state")
        .build()
        .and_then(|c| c.validate().map(|()| c))
        .map(|c| Issuer::start(c).map(|_| ()).map_err(|e| e.to_string()));
    println!("state file: {refused:?}");
}
"#;

#[test]
fn vesta_embed_without_default_features_runs_in_a_users_project() {
    let user = UsersCrate::new(
        "lean-user",
        r#"vesta-embed = { path = "{root}/vesta-embed", default-features = false }"#,
        MAIN_RS,
    );

    let (out, ids) = run_printing_ids(&mut user.cargo("run", &["--quiet"]));
    assert_eq!(ids.len(), 3, "{out}");
    assert!(ids.iter().all(|id| IdFields::decode(*id).machine == 3));
    assert!(
        out.contains("needs vesta-embed built with its feature `state-file`"),
        "{out}"
    );

    let crates = user.dependency_tree(&["-p", "vesta-embed"]);
    // The crate itself is not a dependency.
    let dependencies = crates.len() - 1;
    assert!(
        dependencies < 25,
        "vesta-embed without default features pulls {dependencies} crates: {crates:#?}"
    );
    assert_not_in_tree(
        &crates,
        &["tokio", "toml", "zookeeper-client", "sqlx-core", "hyper"],
    );
}

/// vesta-seq with one database, as a user who names it depends on it: only that database's
/// driver, and no server stack (the coordinators outside the database are features).
#[test]
fn vesta_seq_with_one_database_pulls_only_its_driver() {
    let crates = dependency_tree(&[
        "-p",
        "vesta-seq",
        "--no-default-features",
        "--features",
        "vesta-seq/sqlite",
    ]);
    assert!(
        crates.iter().any(|c| c.starts_with("sqlx-sqlite ")),
        "{crates:#?}"
    );
    assert_not_in_tree(
        &crates,
        &[
            "sqlx-postgres",
            "sqlx-mysql",
            "hyper",
            "zookeeper-client",
            "rustls",
            "tonic",
            "prometheus-client",
            "vesta-service",
            "vesta-server",
        ],
    );
}

/// `cargo run --release -p vesta-cli --no-default-features --target-dir target/lean -- gen -n
/// 5` (the README's first command), built here in debug for the host target (the workspace's
/// own `vesta` is the full one the other tests run).
#[test]
fn vesta_without_default_features_issues_ids_and_names_what_it_left_out() {
    let lean = ["-p", "vesta-cli", "--no-default-features"];
    let crates = dependency_tree(&lean);
    assert_not_in_tree(
        &crates,
        &[
            "sqlx-core",
            "hyper",
            "zookeeper-client",
            "rustls",
            "prometheus-client",
            "vesta-rest",
            "vesta-server",
            "vesta-service",
            "vesta-segment",
            "vesta-seq",
            "vesta-bench",
        ],
    );

    // For the host target (its program apart from the workspace build's `debug/vesta`, which
    // the other tests run), with CI's host-deps package beside it (`.ci/host-deps`): the proc
    // macros and build scripts are the workspace build's, in the same target directory;
    // vesta-cli's features and its dependencies' are unchanged.
    let built = cargo(
        "build",
        &[
            &lean[..],
            &["-p", HOST_DEPS, "--quiet", "--target", host_triple()],
        ]
        .concat(),
    )
    .status()
    .expect("cargo build");
    assert!(built.success(), "building vesta without default features");
    let bin = host_target_profile_dir().join("vesta");
    let vesta = |args: &[&str]| {
        let mut cmd = Command::new(&bin);
        cmd.args(args)
            .env("RUST_LOG", "error")
            .env("XDG_STATE_HOME", state_home());
        cmd
    };

    let run = vesta(&["gen", "-n", "5", "--machine", "7"])
        .output()
        .expect("vesta gen");
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let ids: Vec<u64> = out.lines().map(|l| l.parse().expect("an ID")).collect();
    assert_eq!(ids.len(), 5, "{out}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    for id in &ids {
        let f = IdFields::decode(*id);
        assert_eq!((f.machine, f.gen_method), (7, GenMethod::Embed), "{id}");
    }

    for (args, feature) in [
        (&["serve", "rest"][..], "`serve`"),
        (&["gen", "--zk", "127.0.0.1:2181"], "`leases`"),
        (&["gen", "--server", "127.0.0.1:1"], "`client`"),
        (&["machine", "ls"], "`leases`"),
        (&["segment", "ls", "--db", "sqlite://x.db"], "`segment`"),
        (&["seq", "next", "42", "--db", "sqlite://x.db"], "`seq`"),
        (&["bench", "tcp"], "`bench`"),
    ] {
        fails_in_one_line(
            &mut vesta(args),
            &[
                "not in this build",
                feature,
                "cargo install --path vesta-cli --locked",
            ],
        );
    }
    let version = vesta(&["--version"]).output().expect("vesta --version");
    let version = String::from_utf8_lossy(&version.stdout);
    assert!(version.contains("features none"), "{version}");
}

/// The README's set-up block is two commands, and the first builds the lean `vesta` in a
/// target directory of its own: a later full build's `target/release/vesta` (`serve rest`) is
/// never replaced by one that says "not in this build".
#[test]
fn the_readmes_first_command_builds_apart_from_the_full_binary() {
    let readme = vesta_tests::deploy::read("README.md");
    let setup = readme
        .split("## Set up on a fresh machine")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("the README's set-up block");
    let commands: Vec<&str> = setup
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    assert_eq!(commands.len(), 2, "two set-up commands: {commands:?}");
    let first = commands[0];
    assert!(first.contains("--no-default-features"), "{first}");
    let dir = first
        .split_whitespace()
        .skip_while(|w| *w != "--target-dir")
        .nth(1)
        .expect("the first command names its own --target-dir");
    assert!(dir != "target" && dir.starts_with("target/"), "{first}");
    assert_eq!(commands[1], "scripts/test");
}
