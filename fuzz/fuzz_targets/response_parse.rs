//! Fuzz target `response_parse`: the properties are in `vesta_fuzz::response_parse` (fuzz/src/lib.rs), which the
//! test command also runs on every seed and artifact (tests/tests/it/fuzz_corpus.rs).
//! Built without `cargo fuzz` (stable), the target is a program replaying files through the
//! same check: `cargo run -p vesta-fuzz --bin response_parse -- FILE|DIR...`.

#![cfg_attr(fuzzing, no_main)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vesta_fuzz::response_parse(data));

#[cfg(not(fuzzing))]
fn main() -> std::process::ExitCode {
    vesta_fuzz::replay("response_parse", vesta_fuzz::response_parse)
}
