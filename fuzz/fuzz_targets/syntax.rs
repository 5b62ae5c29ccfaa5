#![no_main]
//! `cargo +nightly fuzz run syntax`: the body and its oracles are `mds_fuzz::syntax::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mds_fuzz::syntax::run(data));
