//! Fuzz target `grpc_request`: the properties are in `vesta_fuzz::grpc_request` (fuzz/src/lib.rs), which the
//! test command also runs on every seed and artifact (tests/tests/it/fuzz_corpus.rs).
//! Built without `cargo fuzz` (stable), the target is a program replaying files through the
//! same check: `cargo run -p vesta-fuzz --bin grpc_request -- FILE|DIR...`.

#![cfg_attr(fuzzing, no_main)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vesta_fuzz::grpc_request(data));

#[cfg(not(fuzzing))]
fn main() -> std::process::ExitCode {
    vesta_fuzz::replay("grpc_request", vesta_fuzz::grpc_request)
}
