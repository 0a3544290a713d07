//! Fuzzes `vesta_core::parse_id`, which reads IDs typed by people and other systems (`vesta
//! explain`, `/expid`), with arbitrary text. Properties: nothing panics; an accepted ID reads
//! back the same from each of its three spellings (decimal, Java `long`, `0x` hex); and a
//! refusal quotes the trimmed text it refused.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vesta_core::parse_id;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_id(text) {
        Ok(id) => {
            assert_eq!(parse_id(&id.to_string()), Ok(id));
            assert_eq!(parse_id(&(id as i64).to_string()), Ok(id));
            assert_eq!(parse_id(&format!("{id:#x}")), Ok(id));
            assert_eq!(parse_id(&format!("  {id:#X}\n")), Ok(id));
        }
        Err(e) => assert_eq!(e.text, text.trim()),
    }
});
