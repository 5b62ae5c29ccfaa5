#![no_main]
//! `cargo +nightly fuzz run pass`: the body and its oracles are `mds_fuzz::pass::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mds_fuzz::pass::run(data));
