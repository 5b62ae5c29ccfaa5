//! A Dynamo-like planner (BASELINES.md section 4), being written: its parts so far.

pub mod budget;
pub mod capacity;
pub mod load;
pub mod predictor;
pub mod series;
