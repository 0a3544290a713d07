//! Fuzz target `parse_id`: the properties are in `vesta_fuzz::parse_id` (fuzz/src/lib.rs), which the
//! test command also runs on every seed and artifact (tests/tests/it/fuzz_corpus.rs).
//! Built without `cargo fuzz` (stable), the target is a program replaying files through the
//! same check: `cargo run -p vesta-fuzz --bin parse_id -- FILE|DIR...`.

#![cfg_attr(fuzzing, no_main)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vesta_fuzz::parse_id(data));

#[cfg(not(fuzzing))]
fn main() -> std::process::ExitCode {
    vesta_fuzz::replay("parse_id", vesta_fuzz::parse_id)
}
