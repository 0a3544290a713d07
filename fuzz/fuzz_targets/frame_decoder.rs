//! Fuzz target `frame_decoder`: the properties are in `vesta_fuzz::frame_decoder` (fuzz/src/lib.rs), which the
//! test command also runs on every seed and artifact (tests/tests/it/fuzz_corpus.rs).
//! Built without `cargo fuzz` (stable), the target is a program replaying files through the
//! same check: `cargo run -p vesta-fuzz --bin frame_decoder -- FILE|DIR...`.

#![cfg_attr(fuzzing, no_main)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vesta_fuzz::frame_decoder(data));

#[cfg(not(fuzzing))]
fn main() -> std::process::ExitCode {
    vesta_fuzz::replay("frame_decoder", vesta_fuzz::frame_decoder)
}
