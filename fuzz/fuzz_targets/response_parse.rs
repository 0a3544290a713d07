//! Fuzz target `response_parse`: the properties are in `vesta_fuzz::response_parse` (fuzz/src/lib.rs), which the
//! test command also runs on every seed and artifact (tests/tests/fuzz_corpus.rs).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vesta_fuzz::response_parse(data));
