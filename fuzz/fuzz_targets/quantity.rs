#![no_main]
//! `cargo +nightly fuzz run quantity`: the body and its oracles are `mds_fuzz::quantity::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mds_fuzz::quantity::run(data));
