//! The generated code checked in under `src/gen/` is what `proto/vesta/v1/vesta.proto`
//! compiles to now (protox, a proto compiler in Rust, then tonic's generator): building the
//! crate needs no `protoc`, and a `.proto` edit without regenerating fails here.
//!
//! After editing the `.proto`: `VESTA_REGEN=1 cargo test -p vesta-grpc --test generated`.

use std::fs;
use std::path::Path;

use prost::Message;

#[test]
fn the_checked_in_code_is_what_the_proto_compiles_to() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let proto_dir = crate_dir.join("../proto");
    let fds = protox::Compiler::new([&proto_dir])
        .expect("the proto include directory")
        .include_source_info(true)
        .include_imports(true)
        .open_file("vesta/v1/vesta.proto")
        .expect("compiling vesta.proto")
        .file_descriptor_set();
    let out = tempfile::tempdir().unwrap();
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
