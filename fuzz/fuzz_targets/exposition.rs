#![no_main]
//! `cargo +nightly fuzz run exposition`: the body and its oracles are `mds_fuzz::exposition::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mds_fuzz::exposition::run(data));
