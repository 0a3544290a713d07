//! Every block of the guides a reader copies from runs as written: docs/grpc.md, docs/seq.md,
//! docs/seq-cluster.md, docs/migrate.md and docs/layout-json.md, and the Python and JavaScript
//! of the README and of the client packages' READMEs. By language:
//!
//! - `console`: each `$` command runs in bash, in a fresh directory with the `vesta` under test
//!   first on `PATH`, and prints what the page shows (quoted 64-bit IDs, which differ at each
//!   run, compared by shape; a JSON answer compared as JSON). `$ vesta serve KIND ... &` starts
//!   that server on a free port, and the page's addresses (`localhost:8080`,
//!   `127.0.0.1:8080` for REST, `127.0.0.1:7654` for TCP) are rewritten to it: the only change
//!   made to a command. `grpcurl` (not in Debian's packages) runs when it is on `PATH`;
//!   otherwise the same calls are made through grpc-js and protobuf's JSON mapping (what
//!   grpcurl prints) and must answer what the page shows.
//! - `python`, `js`: run with the client packages installed (the venv and `node_modules` of
//!   the gRPC tests), against the server the page's text names (grpc.md: `vesta serve rest
//!   --seq-db sqlite://seq.db`), its address rewritten as above; what they print is checked.
//! - `sh` (grpc.md's `protoc` line): run with Debian's Go plugins (scripts/test-deps); `go`:
//!   not compiled (Go's modules come from its module proxy, which the test machines do not
//!   use): every `vestav1.NAME` it uses must be in the generated code.
//! - `sql`: run on SQLite, and the table it makes must be the one the server makes.
//! - `rust`: compiled as doctests (tests/src/lib.rs includes the guide); `toml`: loaded as a
//!   config by `docs_snippets`, as are migrate.md's `sh` blocks, run and checked there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use vesta_tests::bin::{ServerChild, state_home, vesta};
use vesta_tests::client_packages::{clients_dir, python_with_package};
use vesta_tests::docs::{Block, blocks, console_steps};
use vesta_tests::grpc_clients::{PROXY_VARS, node_modules, run};

/// The guides whose every block runs, and the languages each holds.
const GUIDES: &[&str] = &[
    "docs/grpc.md",
    "docs/seq.md",
    "docs/seq-cluster.md",
    "docs/migrate.md",
    "docs/layout-json.md",
];

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Every block of the guides is of a language a test here (or `docs_snippets`, or the
/// doctests) runs: a new block of another kind fails this test until it is run.
#[test]
fn every_block_of_the_guides_is_run() {
    let lib = std::fs::read_to_string(repo().join("tests/src/lib.rs")).unwrap();
    let snippets = std::fs::read_to_string(repo().join("tests/tests/it/docs_snippets.rs")).unwrap();
    for guide in GUIDES {
        let mut kinds = BTreeMap::new();
        for block in blocks(guide) {
            let lang = block.lang.split(',').next().unwrap_or_default();
            let run = match lang {
                "console" | "python" | "js" | "sql" => true,
                "sh" => *guide == "docs/grpc.md" || *guide == "docs/migrate.md",
                "go" => *guide == "docs/grpc.md",
                "rust" => lib.contains(&format!("include_str!(\"../../{guide}\")")),
                "toml" => snippets.contains(&format!("\"{guide}\"")),
                _ => false,
            };
            assert!(
                run,
                "{guide} line {}: a ```{} block no test runs",
                block.line, block.lang
            );
            *kinds.entry(lang.to_owned()).or_insert(0) += 1;
        }
        assert!(!kinds.is_empty(), "{guide}: no blocks");
    }
}

/// What a block runs against: the servers it started (or the page's), by kind.
struct Session {
    dir: tempfile::TempDir,
    hold: tempfile::TempDir,
    servers: Vec<(String, ServerChild)>,
}

impl Session {
    fn new() -> Self {
        Session {
            dir: tempfile::tempdir().unwrap(),
            hold: tempfile::tempdir().unwrap(),
            servers: Vec::new(),
        }
    }

    /// `vesta serve KIND ARGS` in the session's directory, on a free port.
    fn serve(&mut self, kind: &str, args: &[&str]) {
        let hold = self.hold.path().join(kind);
        std::fs::create_dir_all(&hold).unwrap();
        let state = self.dir.path().join(".state");
        let envs = [
            ("VESTA_HOLD_DIR", hold.to_str().unwrap()),
            ("XDG_STATE_HOME", state.to_str().unwrap()),
        ];
        let server = ServerChild::start_in(Some(self.dir.path()), kind, args, &envs);
        self.servers.push((kind.to_owned(), server));
    }

    fn addr(&self, kind: &str) -> Option<&str> {
        self.servers
            .iter()
            .find(|(k, _)| k == kind)
            .map(|(_, s)| s.addr.as_str())
    }

    /// The page's addresses rewritten to the servers'.
    fn rewrite(&self, text: &str) -> String {
        let mut out = text.to_owned();
        if let Some(rest) = self.addr("rest") {
            out = out
                .replace("localhost:8080", rest)
                .replace("127.0.0.1:8080", rest);
        }
        if let Some(tcp) = self.addr("tcp") {
            out = out.replace("127.0.0.1:7654", tcp);
        }
        out
    }

    fn stop(self) {
        for (_, server) in self.servers {
            server.stop_cleanly();
        }
    }
}

/// `$ vesta serve KIND ARGS... &`: the server's kind and arguments.
fn server_line(command: &str) -> Option<(String, Vec<String>)> {
    let words: Vec<&str> = command.strip_suffix('&')?.split_whitespace().collect();
    match words.as_slice() {
        ["vesta", "serve", kind, args @ ..] => Some((
            (*kind).to_owned(),
            args.iter().map(|a| (*a).to_owned()).collect(),
        )),
        _ => None,
    }
}

/// Runs `script` in bash (`-euo pipefail`) in `dir` with `vesta` first on `PATH`; returns
/// stdout, asserting success.
fn bash(script: &str, dir: &Path, what: &str) -> String {
    let path = format!(
        "{}:{}",
        vesta().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .env("XDG_STATE_HOME", state_home())
        .env("RUST_LOG", "error");
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    let (status, out, err) = run(&mut cmd, std::time::Duration::from_secs(120), what);
    assert!(status.success(), "{what}: {status}\n{script}\n{out}\n{err}");
    out
}

/// Quoted IDs (15 digits or more) as `"<id>"`: they differ at every run.
fn ids_masked(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('"') {
        out.push_str(&rest[..=start]);
        rest = &rest[start + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits >= 15 && rest[digits..].starts_with('"') {
            out.push_str("<id>");
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// What a command printed against what the page shows: equal as JSON when the page shows
/// JSON, else line for line (trailing spaces aside), quoted IDs by shape.
fn assert_prints(where_: &str, command: &str, got: &str, shown: &[String]) {
    let shown_text = shown.join("\n");
    if let (Ok(want), Ok(have)) = (
        serde_json::from_str::<serde_json::Value>(&shown_text),
        serde_json::from_str::<serde_json::Value>(got),
    ) && shown_text.trim_start().starts_with('{')
    {
        let (want, have) = (ids_masked(&want.to_string()), ids_masked(&have.to_string()));
        assert_eq!(
            have, want,
            "{where_}: `{command}` printed JSON other than the page's"
        );
        return;
    }
    let norm = |t: &str| {
        t.lines()
            .map(|l| ids_masked(l.trim_end()))
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_owned()
    };
    assert_eq!(
        norm(got),
        norm(&shown_text),
        "{where_}: `{command}` printed other than the page shows"
    );
}

/// Runs a ```console block: its servers started, each command's output checked.
fn run_console(guide: &str, block: &Block, session: &mut Session) {
    for step in console_steps(&block.body) {
        let where_ = format!("{guide} line {}", block.line);
        if let Some((kind, args)) = server_line(&step.command) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            session.serve(&kind, &args);
            assert!(
                step.output.is_empty(),
                "{where_}: a server line prints nothing"
            );
            continue;
        }
        let command = session.rewrite(&step.command);
        let printed = if step.command.starts_with("grpcurl ") && !on_path("grpcurl") {
            grpcurl_without_grpcurl(&step.command, session)
        } else {
            bash(&command, session.dir.path(), &where_)
        };
        assert_prints(&where_, &step.command, &printed, &step.output);
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// What grpcurl would print for the two commands grpc.md shows, made through grpc-js
/// (reflection v1, the services sorted, as grpcurl lists them) and protobuf's JSON mapping
/// (uint64 as text, two spaces of indent, as grpcurl prints a message).
fn grpcurl_without_grpcurl(command: &str, session: &Session) -> String {
    let addr = session.addr("rest").expect("a REST server for grpcurl");
    if command == "grpcurl -plaintext 127.0.0.1:8080 list" {
        let script = r#"
const path = require("path");
const grpc = require("@grpc/grpc-js");
const loader = require("@grpc/proto-loader");
const file = path.join(path.dirname(require.resolve("@grpc/reflection/package.json")),
  "build/proto/grpc/reflection/v1/reflection.proto");
const { ServerReflection } = grpc.loadPackageDefinition(loader.loadSync(file, { keepCase: true }))
  .grpc.reflection.v1;
const client = new ServerReflection(process.argv[1], grpc.credentials.createInsecure());
const call = client.ServerReflectionInfo();
const names = [];
call.on("data", (r) => { for (const s of r.list_services_response.service) names.push(s.name); call.end(); });
call.on("end", () => { console.log(names.sort().join("\n")); client.close(); });
call.on("error", (e) => { console.error(e); process.exit(1); });
call.write({ list_services: "" });
"#;
        return node_script(script, &[addr], session.dir.path());
    }
    if command == r#"grpcurl -plaintext -d '{"count": 3}' 127.0.0.1:8080 vesta.v1.Vesta/NextIds"# {
        let script = r#"
import sys
import grpc
from google.protobuf import json_format
from vesta_client.pb import vesta_pb2, vesta_pb2_grpc

with grpc.insecure_channel(sys.argv[1], options=[("grpc.enable_http_proxy", 0)]) as channel:
    answer = vesta_pb2_grpc.VestaStub(channel).NextIds(vesta_pb2.NextIdsRequest(count=3), timeout=30)
print(json_format.MessageToJson(answer, indent=2))
"#;
        return python_script(script, &[addr], session.dir.path());
    }
    panic!("docs/grpc.md: a grpcurl line this test cannot make without grpcurl: {command}");
}

/// `node -e SCRIPT ARGS` with the gRPC tests' `node_modules` and `vesta-client` resolvable.
fn node_script(script: &str, args: &[&str], dir: &Path) -> String {
    let modules = dir.join(".node-path");
    if !modules.exists() {
        std::fs::create_dir_all(&modules).unwrap();
        std::os::unix::fs::symlink(clients_dir().join("node"), modules.join("vesta-client"))
            .unwrap();
    }
    let node_path = std::env::join_paths([modules.as_path(), node_modules()]).unwrap();
    let mut cmd = Command::new("node");
    cmd.arg("-e")
        .arg(script)
        .args(args)
        .current_dir(dir)
        .env("NODE_PATH", node_path);
    run_program(&mut cmd, "node")
}

/// `python -c SCRIPT ARGS` in the venv with the package installed.
fn python_script(script: &str, args: &[&str], dir: &Path) -> String {
    let mut cmd = Command::new(python_with_package());
    cmd.arg("-c")
        .arg(script)
        .args(args)
        .current_dir(dir)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run_program(&mut cmd, "python")
}

fn run_program(cmd: &mut Command, what: &str) -> String {
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    let (status, out, err) = run(cmd, std::time::Duration::from_secs(120), what);
    assert!(status.success(), "{what}: {status}\n{out}\n{err}");
    out
}

/// The lines a program printed, for checks by position.
fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

/// docs/grpc.md against `vesta serve rest --seq-db sqlite://seq.db` (what the page names):
/// the Python and Node packages' examples, grpc-js alone, grpcurl's two lines, the Go code
/// generated by the `protoc` line with the names the Go example uses; and the client
/// packages' READMEs' examples against the same server.
#[test]
fn grpc_md_runs_as_written() {
    let guide = "docs/grpc.md";
    let mut session = Session::new();
    session.serve("rest", &["--seq-db", "sqlite://seq.db"]);
    let proto_link = session.dir.path().join("proto");
    std::os::unix::fs::symlink(repo().join("proto"), &proto_link).unwrap();
    let all = blocks(guide);
    let of = |lang: &'static str| all.iter().filter(move |b| b.lang == lang);

    let python: Vec<&Block> = of("python").collect();
    assert_eq!(python.len(), 1, "{guide}: the Python block");
    let out = python_script(&session.rewrite(&python[0].body), &[], session.dir.path());
    let said = lines(&out);
    assert_eq!(said.len(), 8, "{out}");
    let id: u64 = said[0].parse().unwrap();
    assert_eq!(
        &said[2..],
        [
            "10000",
            said[3],
            "SERVING",
            "1",
            "INVALID_ARGUMENT count",
            "924"
        ],
        "{out}"
    );
    assert!(said[3].ends_with('Z') && said[3].len() == 24, "{out}");

    let js: Vec<&Block> = of("js").collect();
    assert_eq!(
        js.len(),
        2,
        "{guide}: the package's and grpc-js's Node blocks"
    );
    let out = node_script(&session.rewrite(&js[0].body), &[], session.dir.path());
    let said = lines(&out);
    assert_eq!(said.len(), 7, "{out}");
    let node_id: u64 = said[0].strip_suffix('n').unwrap().parse().unwrap();
    assert!(node_id > id, "{out}");
    assert_eq!(
        &said[2..],
        ["10000", said[3], "SERVING", "2n", "924n"],
        "{out}"
    );
    let out = node_script(&session.rewrite(&js[1].body), &[], session.dir.path());
    let mut said = lines(&out);
    said.sort_unstable();
    assert_eq!(said.len(), 2, "{out}");
    assert_eq!(said[1], "SERVING", "{out}");
    let raw: u64 = said[0].parse().unwrap();
    assert!(raw > node_id, "{out}");

    for block in of("console") {
        run_console(guide, block, &mut session);
    }

    let sh: Vec<&Block> = of("sh").collect();
    assert_eq!(sh.len(), 1, "{guide}: the protoc line");
    bash(
        &sh[0].body,
        session.dir.path(),
        "docs/grpc.md's protoc line",
    );
    let generated = ["vesta.pb.go", "vesta_grpc.pb.go"]
        .map(|f| std::fs::read_to_string(session.dir.path().join("vesta/v1").join(f)).unwrap())
        .join("\n");
    assert!(
        generated.contains("package vestav1"),
        "the Go package's name"
    );
    let go: Vec<&Block> = of("go").collect();
    assert_eq!(go.len(), 1, "{guide}: the Go block");
    let mut used = go[0]
        .body
        .split("vestav1.")
        .skip(1)
        .map(|rest| {
            rest.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .next()
                .unwrap()
        })
        .collect::<Vec<_>>();
    used.sort_unstable();
    used.dedup();
    assert_eq!(
        used,
        ["NewVestaClient", "NextIdRequest"],
        "the names the Go example uses"
    );
    for name in used {
        assert!(
            generated.contains(&format!("func {name}("))
                || generated.contains(&format!("type {name} struct")),
            "{name} is not in the generated Go code"
        );
    }
    assert!(generated.contains("func (x *NextIdResponse) GetId() uint64"));

    // The README's Python, and the packages' READMEs' Python and JavaScript, against the same
    // server.
    for block in blocks("README.md").iter().filter(|b| b.lang == "python") {
        let out = python_script(&session.rewrite(&block.body), &[], session.dir.path());
        assert!(
            out.ends_with("2020-07-08T12:00:00.000Z\n"),
            "README.md: {out}"
        );
    }
    let readme = "clients/python/README.md";
    for block in blocks(readme).iter().filter(|b| b.lang == "python") {
        let out = python_script(&session.rewrite(&block.body), &[], session.dir.path());
        assert!(!out.is_empty(), "{readme} line {}", block.line);
        if block.body.contains("Layout.preset(\"leaf\")") {
            assert!(
                out.contains("331 2020-07-08T12:00:00.000Z"),
                "{readme}: {out}"
            );
            assert!(out.contains("\n100000\nSERVING\n"), "{readme}: {out}");
        }
    }
    let readme = "clients/node/README.md";
    for block in blocks(readme).iter().filter(|b| b.lang == "js") {
        let out = node_script(&session.rewrite(&block.body), &[], session.dir.path());
        assert!(out.contains("\n100000\nSERVING\n"), "{readme}: {out}");
        assert!(
            out.contains("331n 2020-07-08T12:00:00.000Z"),
            "{readme}: {out}"
        );
    }
    session.stop();
}

/// docs/seq.md: the table's SQL on SQLite is the table the server makes, and each console
/// block (REST with curl, TCP, the CLI on a database file) prints what the page shows, each in
/// a directory of its own with its own servers.
#[test]
fn seq_md_runs_as_written() {
    let guide = "docs/seq.md";
    let all = blocks(guide);
    let sql: Vec<&Block> = all.iter().filter(|b| b.lang == "sql").collect();
    assert_eq!(sql.len(), 1, "{guide}: the table's SQL");
    let dir = tempfile::tempdir().unwrap();
    let documented = table_columns(dir.path(), "documented.db", &sql[0].body);
    bash(
        "vesta seq next k --db sqlite://made.db >/dev/null",
        dir.path(),
        "vesta seq next on a fresh database",
    );
    let made = table_columns(dir.path(), "made.db", "");
    assert_eq!(
        documented, made,
        "{guide}: the documented table against the server's"
    );
    // The documented table works: the numbers go on in it.
    let on_it = bash(
        "vesta seq next k -n 2 --db sqlite://documented.db",
        dir.path(),
        "vesta seq next on the documented table",
    );
    assert_eq!(on_it, "1\n2\n");

    let consoles: Vec<&Block> = all.iter().filter(|b| b.lang == "console").collect();
    assert!(consoles.len() >= 3, "{guide}: REST, TCP and the CLI");
    for block in consoles {
        let mut session = Session::new();
        run_console(guide, block, &mut session);
        session.stop();
    }
}

/// The columns of `vesta_seq` in the SQLite file `name` (in `dir`), after running `sql` on it
/// (the documented `CREATE TABLE`), through the sqlite3 C library the tests link.
fn table_columns(dir: &Path, name: &str, sql: &str) -> Vec<(String, String, bool, bool)> {
    use sqlx::{Connection, Row};
    let url = format!("sqlite://{}?mode=rwc", dir.join(name).display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        if !sql.is_empty() {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        sqlx::query("SELECT name, type, \"notnull\", pk FROM pragma_table_info('vesta_seq')")
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r.get::<String, _>(0),
                    r.get::<String, _>(1).to_uppercase(),
                    r.get::<i64, _>(2) != 0,
                    r.get::<i64, _>(3) != 0,
                )
            })
            .collect()
    })
}

/// docs/layout-json.md: the JSON it shows is what `vesta layout --json` prints.
#[test]
fn layout_json_md_runs_as_written() {
    let guide = "docs/layout-json.md";
    let consoles: Vec<Block> = blocks(guide)
        .into_iter()
        .filter(|b| b.lang == "console")
        .collect();
    assert_eq!(consoles.len(), 1, "{guide}");
    let mut session = Session::new();
    run_console(guide, &consoles[0], &mut session);
    session.stop();
}
