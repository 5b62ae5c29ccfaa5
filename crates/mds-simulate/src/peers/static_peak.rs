//! Static peak provisioning (the evaluation protocol's floor for cost): each role holds, from
//! time zero and warm, the replicas of the trace's busiest minute at the per-replica token
//! capacity the TokenThroughput run uses, `ceil(peak / capacity)` within the bounds, and never
//! changes them.

use std::collections::BTreeMap;

use super::{Peer, View};

pub struct StaticPeak {
    counts: BTreeMap<String, i32>,
}

impl StaticPeak {
    /// Holds `counts` (the harness starts the target at them).
    pub fn new(counts: BTreeMap<String, i32>) -> StaticPeak {
        StaticPeak { counts }
    }

    pub fn counts(&self) -> &BTreeMap<String, i32> {
        &self.counts
    }
}

impl Peer for StaticPeak {
    fn name(&self) -> String {
        "static-peak".into()
    }

    fn interval(&self) -> f64 {
        3600.0
    }

    fn through_prometheus(&self) -> bool {
        false
    }

    fn decide(&mut self, view: &View) -> BTreeMap<String, i32> {
        view.roles
            .iter()
            .filter_map(|r| Some((r.name.clone(), r.clamp(*self.counts.get(&r.name)?))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::testing::{ready, view};

    #[test]
    fn holds_its_counts_whatever_the_load() {
        let mut peak = StaticPeak::new(BTreeMap::from([("server".to_string(), 5)]));
        for queue in [0.0, 500.0] {
            let v = view(60.0, 5, 1, 8, vec![ready(0, queue, 0.9)]);
            assert_eq!(peak.decide(&v)["server"], 5);
        }
        // Bounds still hold.
        let v = view(0.0, 5, 1, 3, vec![]);
        assert_eq!(peak.decide(&v)["server"], 3);
    }
}
