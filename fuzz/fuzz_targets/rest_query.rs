//! Fuzz target `rest_query`: the properties are in `vesta_fuzz::rest_query` (fuzz/src/lib.rs), which the
//! test command also runs on every seed and artifact (tests/tests/fuzz_corpus.rs).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vesta_fuzz::rest_query(data));
