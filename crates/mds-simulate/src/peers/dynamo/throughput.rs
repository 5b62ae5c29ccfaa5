//! The throughput mode's step (module documentation of `dynamo`): the interval's readings,
//! the corrections, the predictors and the replica counts they give.

use mds_api::target::RoleKind;

use super::predictor::LoadPredictor;
use super::series::Increase;
use super::{DynamoPlanner, MIN_ENDPOINT, THROUGHPUT_INTERVAL};
use crate::peers::{RoleView, View};

/// One throughput group's predictors and corrections: the prefill/decode pair, or one
/// Server role.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Forecast {
    pub(super) requests: LoadPredictor,
    pub(super) isl: LoadPredictor,
    pub(super) osl: LoadPredictor,
    pub(super) ttft_correction: f64,
    pub(super) itl_correction: f64,
}

/// One role's readings since the last throughput step.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub(super) struct Interval {
    pub(super) increase: Increase,
    /// Sum over decisions of the mean `running` of the ready replicas, and those decisions.
    pub(super) running: f64,
    pub(super) decisions: u32,
}

impl Interval {
    pub(super) fn add(&mut self, other: &Interval) {
        self.increase.add(&other.increase);
        self.running += other.running;
        self.decisions += other.decisions;
    }

    fn mean_running(&self) -> f64 {
        if self.decisions == 0 {
            0.0
        } else {
            self.running / f64::from(self.decisions)
        }
    }
}

impl DynamoPlanner {
    /// The throughput step: new floors from the interval's readings.
    pub(super) fn throughput(&mut self, view: &View) {
        let intervals = std::mem::take(&mut self.intervals);
        let sum = |kind: RoleKind| {
            let mut total = Interval::default();
            let mut any = false;
            for role in view.roles.iter().filter(|r| r.kind == kind) {
                any = true;
                if let Some(i) = intervals.get(&role.name) {
                    total.add(i);
                }
            }
            any.then_some(total)
        };
        let (prefill, decode) = (sum(RoleKind::Prefill), sum(RoleKind::Decode));
        if prefill.is_some() || decode.is_some() {
            let prefill_side = prefill.or(decode).unwrap_or_default();
            let decode_side = decode.or(prefill).unwrap_or_default();
            let (p, d) = self.forecast(String::new(), &prefill_side, &decode_side);
            for role in &view.roles {
                let n = match role.kind {
                    RoleKind::Prefill => self.prefill_replicas(p, role),
                    RoleKind::Decode => self.decode_replicas(d, role),
                    _ => continue,
                };
                self.floors.insert(role.name.clone(), n);
            }
        }
        for role in view.roles.iter().filter(|r| r.kind == RoleKind::Server) {
            let own = intervals.get(&role.name).copied().unwrap_or_default();
            let (p, d) = self.forecast(role.name.clone(), &own, &own);
            let n = self
                .prefill_replicas(p, role)
                .max(self.decode_replicas(d, role));
            self.floors.insert(role.name.clone(), n);
        }
    }

    /// Updates a group's corrections and predictors from its readings, and returns the
    /// forecast (prefill tokens per second after the TTFT correction, and the decode demand).
    fn forecast(&mut self, group: String, prefill: &Interval, decode: &Interval) -> (f64, Demand) {
        let predictor = self.predictor;
        let forecast = self.forecasts.entry(group).or_insert_with(|| Forecast {
            requests: LoadPredictor::new(predictor),
            isl: LoadPredictor::new(predictor),
            osl: LoadPredictor::new(predictor),
            ttft_correction: 1.0,
            itl_correction: 1.0,
        });
        let requests = decode.increase.requests;
        let isl = prefill.increase.prompt_tokens / prefill.increase.requests;
        let osl = decode.increase.generation_tokens / decode.increase.requests;
        if let Some(ttft) = prefill.increase.mean_ttft().filter(|_| isl.is_finite()) {
            let expected = self.capacity.expected_ttft(isl);
            forecast.ttft_correction = ttft / expected;
        }
        if let Some(itl) = decode.increase.mean_itl() {
            let finite = |v: f64| if v.is_finite() { v.max(0.0) } else { 0.0 };
            let context = finite(isl) + finite(osl) / 2.0;
            let expected = self.capacity.expected_itl(decode.mean_running(), context);
            forecast.itl_correction = itl / expected;
        }
        forecast.requests.add(requests);
        forecast.isl.add(isl);
        forecast.osl.add(osl);
        let next_requests = forecast.requests.predict().max(0.0);
        let next_isl = forecast.isl.predict().max(0.0);
        let next_osl = forecast.osl.predict().max(0.0);
        let prefill_tokens =
            next_requests * next_isl / THROUGHPUT_INTERVAL * forecast.ttft_correction.min(1.0);
        let itl_correction = forecast.itl_correction;
        let decode = Demand {
            tokens_per_second: next_requests * next_osl / THROUGHPUT_INTERVAL,
            itl_seconds: if itl_correction.is_finite() && itl_correction > 0.0 {
                self.sla.itl_seconds / itl_correction
            } else {
                self.sla.itl_seconds
            },
            context: next_isl + next_osl / 2.0,
        };
        (prefill_tokens, decode)
    }

    fn prefill_replicas(&self, tokens_per_second: f64, role: &RoleView) -> i32 {
        let g = role.gpus_per_replica.max(1);
        let per_gpu = self
            .capacity
            .prefill_tokens_per_second_per_gpu(self.sla.ttft_seconds, g);
        replicas(tokens_per_second / per_gpu / f64::from(g))
    }

    fn decode_replicas(&self, demand: Demand, role: &RoleView) -> i32 {
        let g = role.gpus_per_replica.max(1);
        let per_gpu =
            self.capacity
                .decode_tokens_per_second_per_gpu(demand.itl_seconds, demand.context, g);
        replicas(demand.tokens_per_second / per_gpu / f64::from(g))
    }
}

/// A decode demand: tokens per second at a corrected ITL target and a mean context.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Demand {
    tokens_per_second: f64,
    itl_seconds: f64,
    context: f64,
}

/// `ceil(x)` replicas, at least [`MIN_ENDPOINT`] (a NaN or negative demand is none).
fn replicas(x: f64) -> i32 {
    let n = if x.is_finite() && x > 0.0 {
        x.ceil().min(f64::from(i32::MAX))
    } else if x == f64::INFINITY {
        f64::from(i32::MAX)
    } else {
        0.0
    };
    (n as i32).max(MIN_ENDPOINT)
}
