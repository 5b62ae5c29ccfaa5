#![no_main]
//! `cargo +nightly fuzz run webhook`: the body and its oracles are `mds_fuzz::webhook::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mds_fuzz::webhook::run(data));
