//! The generated code checked in under `src/gen/` is what `proto/vesta/v1/vesta.proto`
//! compiles to now (`protoc`, then tonic's generator): building the crate needs no `protoc`,
//! only this test does (Debian's `protobuf-compiler`, which scripts/test-deps installs), and a
//! `.proto` edit without regenerating fails here.
//!
//! After editing the `.proto`: `VESTA_REGEN=1 cargo test -p vesta-grpc --test generated`.

use std::fs;
use std::path::Path;
use std::process::Command;

use prost::Message;
use prost_types::FileDescriptorSet;

/// The descriptor set `protoc` compiles the proto to (imports and comments included).
fn compile(proto_dir: &Path, file: &str, out: &Path) -> FileDescriptorSet {
    let fds_path = out.join("fds.bin");
    let protoc = std::env::var_os("PROTOC").unwrap_or_else(|| "protoc".into());
    let run = Command::new(&protoc)
        .arg("-I")
        .arg(proto_dir)
        .args(["--include_imports", "--include_source_info", "-o"])
        .arg(&fds_path)
        .arg(file)
        .output()
        .unwrap_or_else(|e| {
            panic!("{protoc:?}: {e} (apt-get install protobuf-compiler; scripts/test-deps does)")
        });
    assert!(
        run.status.success(),
        "protoc: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    FileDescriptorSet::decode(&fs::read(&fds_path).unwrap()[..]).expect("protoc's descriptor set")
}

#[test]
fn the_checked_in_code_is_what_the_proto_compiles_to() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let proto_dir = crate_dir.join("../proto");
    let out = tempfile::tempdir().unwrap();
    let fds = compile(&proto_dir, "vesta/v1/vesta.proto", out.path());
    tonic_prost_build::configure()
        .out_dir(out.path())
        .build_transport(true)
        .client_mod_attribute("vesta.v1", r#"#[cfg(feature = "client")]"#)
        .server_mod_attribute("vesta.v1", r#"#[cfg(feature = "server")]"#)
        .compile_fds(fds.clone())
        .expect("generating the Rust code");
    let code = fs::read_to_string(out.path().join("vesta.v1.rs")).unwrap();
    let descriptors = fds.encode_to_vec();

    let gen_dir = crate_dir.join("src/gen");
    if std::env::var_os("VESTA_REGEN").is_some() {
        fs::create_dir_all(&gen_dir).unwrap();
        fs::write(gen_dir.join("vesta.v1.rs"), &code).unwrap();
        fs::write(gen_dir.join("vesta.v1.bin"), &descriptors).unwrap();
        return;
    }
    let stale = "out of date: run `VESTA_REGEN=1 cargo test -p vesta-grpc --test generated`";
    assert!(
        fs::read_to_string(gen_dir.join("vesta.v1.rs")).unwrap() == code,
        "src/gen/vesta.v1.rs is {stale}"
    );
    assert!(
        fs::read(gen_dir.join("vesta.v1.bin")).unwrap() == descriptors,
        "src/gen/vesta.v1.bin is {stale}"
    );
}
