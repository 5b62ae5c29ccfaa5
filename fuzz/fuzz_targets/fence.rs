#![no_main]
//! `cargo +nightly fuzz run fence`: the body and its oracles are `mds_fuzz::fence::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mds_fuzz::fence::run(data));
