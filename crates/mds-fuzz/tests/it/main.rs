//! Every stored corpus input through its target's body, on the stable toolchain: a change that
//! breaks an oracle on an input a fuzzer once found (or was seeded with) fails here.

mod corpora;
mod oracles;
