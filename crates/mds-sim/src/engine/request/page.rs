//! The request-level engine's numbers in the shape the page renderer reads ([`EngineState`]),
//! so both engine models serve the same vLLM and SGLang pages.

use super::RequestEngine;
use crate::engine::{EngineState, StepSummary};
use crate::load::Arrivals;

impl RequestEngine {
    /// Copies the gauges, counters and histograms into `state`, the page source of the
    /// instance (its flavor, kind and start time stay as they are).
    pub fn write_page_state(&self, state: &mut EngineState) {
        let c = &self.counters;
        state.running = self.running() as f64;
        state.backlog = Arrivals {
            requests: self.waiting() as f64,
            ..Arrivals::default()
        };
        state.kv_usage = self.kv_usage();
        state.counters.prompt_tokens = (c.prompt_tokens_computed + c.prompt_tokens_cached) as f64;
        state.counters.prefix_hit_tokens = c.prompt_tokens_cached as f64;
        state.counters.generation_tokens = c.generation_tokens as f64;
        state.counters.requests = c.successes as f64;
        state.ttft.clone_from(&self.histograms.ttft);
        state.itl.clone_from(&self.histograms.itl);
        state.request_tpot.clone_from(&self.histograms.request_tpot);
        state.last = StepSummary::default();
    }
}
