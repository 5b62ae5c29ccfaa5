//! The planner: observations, policy, memory and `now` in; per-role recommendations, the
//! constrained replica vector and the reasons out. Pure and deterministic: no I/O, no clock.
//!
//! One pass ([`plan`]):
//! 1. bounds and ratio bands must hold for the current vector (else `BoundsConflict` or
//!    `RatioConflict`, nothing moves);
//! 2. each role's algorithm gives a raw recommendation (coupled roles follow their ratio);
//! 3. pacing and guards turn each role into a box of counts it may take this pass;
//! 4. the solver picks, per connected component, the feasible vector nearest the
//!    recommendations (D17);
//! 5. one direction per commit and at most one shrinking role (D16).

pub mod algorithms;
pub mod plan;
pub mod policy;
pub mod reason;
pub mod reversal;
pub mod solver;
pub mod state;

pub use plan::{Guard, Guards, Limit, Plan, PlanInput, RoleInput, RolePlan, plan, wake_at};
pub use policy::Policy;
pub use reason::Reason;
pub use state::PlannerState;
