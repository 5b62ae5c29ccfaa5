//! Settings of the world: delays of the stand-in operator and Kueue, the retirement budgets of
//! TARGET.md section 5, and per-role engine settings.

use jiff::SignedDuration;

use crate::engine::EngineProfile;
use crate::engine::request::RequestProfile;

/// Phase budgets of a retirement (TARGET.md section 5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetirementBudgets {
    /// `Admitted` and `Disqualified` together.
    pub withdrawal: SignedDuration,
    pub drain: SignedDuration,
    /// Expiry is only reported.
    pub settle: SignedDuration,
    /// The whole operation; a phase expires at the earlier of this deadline and its own budget.
    pub overall: SignedDuration,
}

impl Default for RetirementBudgets {
    fn default() -> Self {
        RetirementBudgets {
            withdrawal: SignedDuration::from_secs(30),
            drain: SignedDuration::from_secs(240),
            settle: SignedDuration::from_secs(30),
            overall: SignedDuration::from_secs(300),
        }
    }
}

/// How one role's instances start and serve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoleSettings {
    /// From admission (Pods ungated) to Ready; also the time a restarted member takes.
    pub cold_start: SignedDuration,
    /// Each start draws its cold start uniformly within `cold_start × (1 ± spread)` from the
    /// world's seeded generator; 0 (the default) makes every start take `cold_start`.
    pub cold_start_spread: f64,
    /// The fluid engine model's capacities and latencies.
    pub engine: EngineProfile,
    /// The request-level engine model, used when the deployment is offered requests
    /// ([`World::set_requests`](crate::World::set_requests)).
    pub request_profile: RequestProfile,
    /// GPUs each Pod of the role reserves from its instance type's quota.
    pub gpus_per_pod: u32,
}

impl Default for RoleSettings {
    fn default() -> Self {
        RoleSettings {
            cold_start: SignedDuration::from_secs(60),
            cold_start_spread: 0.0,
            engine: EngineProfile::default(),
            request_profile: RequestProfile::llama3_8b_h100_vllm(),
            gpus_per_pod: 1,
        }
    }
}

/// World-wide settings.
#[derive(Clone, Debug, PartialEq)]
pub struct WorldConfig {
    /// Step length of [`World::advance_to`](crate::World::advance_to): one operator pass each.
    pub tick: SignedDuration,
    /// From an ordinal's Pods to its Workload (`PodGroupIncomplete`, then `AdmissionInFlight`).
    pub workload_delay: SignedDuration,
    /// From `QuotaReserved` to `Admitted` (admission checks).
    pub admission_check_delay: SignedDuration,
    /// A Workload waiting for quota this long is parked (`spec.active: false`); `None` never.
    pub park_after: Option<SignedDuration>,
    /// From deletion to the Pods being gone from the API server.
    pub pod_termination: SignedDuration,
    /// How long a router needs, after withdrawal, to confirm no target member serves and no
    /// dispatch is recent.
    pub router_confirm_delay: SignedDuration,
    /// From the Pods being gone to the retirement field being cleared.
    pub settle_delay: SignedDuration,
    pub budgets: RetirementBudgets,
    /// Older operator revisions read every member while draining and never see idle on
    /// non-serving ones: retirements of `size > 1` instances abort.
    pub abort_multi_member_retirements: bool,
    /// The GPUStack revisions examined abort every Prefill/Decode retirement outright ("a
    /// disaggregated replica has no verifiable decoder-side release"); `false` plays a
    /// GPUStack that completes them as the spec describes. Our scaler must be right with
    /// either (D35).
    pub abort_disaggregated_retirements: bool,
    /// Non-leader members of an instance carry `prometheus.io/*` annotations too (they serve
    /// no page either way: leader-served parallelism).
    pub annotate_non_leaders: bool,
    /// Settings of roles nobody configured.
    pub default_role: RoleSettings,
    /// The address slot of the world's first Pod (see `loopback_ip`); later Pods count up from
    /// it. Worlds mirrored on one machine at once take disjoint ranges, so no two Pods share an
    /// address.
    pub first_ip_slot: u32,
    /// Seeds the world's generator (cold-start draws).
    pub seed: u64,
}

impl Default for WorldConfig {
    fn default() -> Self {
        WorldConfig {
            tick: SignedDuration::from_secs(1),
            workload_delay: SignedDuration::ZERO,
            admission_check_delay: SignedDuration::ZERO,
            park_after: Some(SignedDuration::from_mins(30)),
            pod_termination: SignedDuration::from_secs(2),
            router_confirm_delay: SignedDuration::from_secs(2),
            settle_delay: SignedDuration::from_secs(1),
            budgets: RetirementBudgets::default(),
            abort_multi_member_retirements: false,
            abort_disaggregated_retirements: true,
            annotate_non_leaders: false,
            default_role: RoleSettings::default(),
            first_ip_slot: 0,
            seed: 0,
        }
    }
}

impl WorldConfig {
    /// A positive tick, no negative delay or budget, a valid default engine.
    pub fn validate(&self) -> Result<(), String> {
        if self.tick <= SignedDuration::ZERO {
            return Err(format!("tick is {}; it must be positive", self.tick));
        }
        let durations = [
            ("workload_delay", self.workload_delay),
            ("admission_check_delay", self.admission_check_delay),
            ("park_after", self.park_after.unwrap_or_default()),
            ("pod_termination", self.pod_termination),
            ("router_confirm_delay", self.router_confirm_delay),
            ("settle_delay", self.settle_delay),
            ("budgets.withdrawal", self.budgets.withdrawal),
            ("budgets.drain", self.budgets.drain),
            ("budgets.settle", self.budgets.settle),
            ("budgets.overall", self.budgets.overall),
        ];
        for (field, value) in durations {
            if value.is_negative() {
                return Err(format!("{field} is {value}; it must not be negative"));
            }
        }
        self.default_role
            .validate()
            .map_err(|e| format!("default_role: {e}"))
    }
}

impl RoleSettings {
    pub fn validate(&self) -> Result<(), String> {
        if self.cold_start.is_negative() {
            return Err(format!(
                "cold_start is {}; it must not be negative",
                self.cold_start
            ));
        }
        if !(0.0..1.0).contains(&self.cold_start_spread) {
            return Err(format!(
                "cold_start_spread is {}; it must be at least 0 and below 1",
                self.cold_start_spread
            ));
        }
        self.request_profile
            .validate()
            .map_err(|e| format!("request_profile.{e}"))?;
        self.engine.validate().map_err(|e| format!("engine.{e}"))
    }

    /// One start's cold start, drawn from `rng` (see `cold_start_spread`).
    pub(crate) fn draw_cold_start(&self, rng: &mut crate::rng::Rng) -> SignedDuration {
        if self.cold_start_spread == 0.0 {
            return self.cold_start;
        }
        let factor = rng.uniform(1.0 - self.cold_start_spread, 1.0 + self.cold_start_spread);
        let millis = (self.cold_start.as_millis() as f64 * factor).round() as i64;
        SignedDuration::from_millis(millis.max(0))
    }
}
