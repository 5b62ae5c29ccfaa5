#![no_main]
//! `cargo +nightly fuzz run scaler`: the body and its oracles are `mds_fuzz::scaler::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mds_fuzz::scaler::run(data));
