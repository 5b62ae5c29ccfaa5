//! Interval increases of the engines' counters, per replica, as Prometheus' `increase()`
//! reads them: a series is keyed by role and ordinal and restarts with the engine
//! (`started_at`); a counter that goes down has restarted too. A restarted series counts from
//! 0 (its value is all new since its engine started), and so does a series first seen after
//! the first read (a new replica: what it served before its first sample was served since
//! the last read). At the first read nothing is known of what came before: every series'
//! value is its baseline and the increase is 0, as for a planner started on a running
//! deployment.

use std::collections::{BTreeMap, BTreeSet};

use super::super::{Sample, View};

/// Counter increases over some span, summed over replicas.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Increase {
    pub requests: f64,
    pub prompt_tokens: f64,
    pub generation_tokens: f64,
    pub ttft_sum: f64,
    pub ttft_count: f64,
    pub itl_sum: f64,
    pub itl_count: f64,
}

impl Increase {
    pub fn add(&mut self, other: &Increase) {
        self.requests += other.requests;
        self.prompt_tokens += other.prompt_tokens;
        self.generation_tokens += other.generation_tokens;
        self.ttft_sum += other.ttft_sum;
        self.ttft_count += other.ttft_count;
        self.itl_sum += other.itl_sum;
        self.itl_count += other.itl_count;
    }

    /// Mean TTFT of the span's observations (`None` without any).
    pub fn mean_ttft(&self) -> Option<f64> {
        (self.ttft_count > 0.0).then(|| self.ttft_sum / self.ttft_count)
    }

    pub fn mean_itl(&self) -> Option<f64> {
        (self.itl_count > 0.0).then(|| self.itl_sum / self.itl_count)
    }
}

/// The last sample of every replica's series.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Series {
    last: BTreeMap<(String, u32), Sample>,
    /// A first read has been made ([`Series::retain`] ends each read).
    primed: bool,
}

impl Series {
    /// The increase of `role`'s replica `ordinal` since its previous sample, and remembers
    /// `sample` as the new previous one.
    pub fn increase(&mut self, role: &str, ordinal: u32, sample: &Sample) -> Increase {
        let previous = self.last.insert((role.to_string(), ordinal), *sample);
        if previous.is_none() && !self.primed {
            return Increase::default();
        }
        let before = previous.filter(|b| b.started_at == sample.started_at);
        let rise = |now: f64, then: Option<f64>| match then {
            Some(then) if now >= then => now - then,
            _ => now,
        };
        let b = before.as_ref();
        Increase {
            requests: rise(sample.requests, b.map(|b| b.requests)),
            prompt_tokens: rise(sample.prompt_tokens, b.map(|b| b.prompt_tokens)),
            generation_tokens: rise(sample.generation_tokens, b.map(|b| b.generation_tokens)),
            ttft_sum: rise(sample.ttft_sum, b.map(|b| b.ttft_sum)),
            ttft_count: rise(sample.ttft_count, b.map(|b| b.ttft_count)),
            itl_sum: rise(sample.itl_sum, b.map(|b| b.itl_sum)),
            itl_count: rise(sample.itl_count, b.map(|b| b.itl_count)),
        }
    }

    /// Ends a read: forgets the replicas that are no longer in `view` (a replica in it
    /// without a sample keeps its series: its next sample continues it, or restarts it if its
    /// engine did).
    pub fn retain(&mut self, view: &View) {
        self.primed = true;
        let present: BTreeSet<(&str, u32)> = view
            .roles
            .iter()
            .flat_map(|r| r.replicas.iter().map(|x| (r.name.as_str(), x.ordinal)))
            .collect();
        self.last
            .retain(|(role, ordinal), _| present.contains(&(role.as_str(), *ordinal)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::testing::{replica, view};
    use crate::peers::{Lifecycle, Sample};

    fn counters(requests: f64, started_at: f64) -> Sample {
        Sample {
            requests,
            ttft_count: requests,
            ttft_sum: requests * 0.1,
            started_at,
            ..Sample::default()
        }
    }

    #[test]
    fn increases_handle_first_reads_restarts_and_new_replicas() {
        let mut s = Series::default();
        let v = view(0.0, 1, 1, 4, vec![replica(0, Lifecycle::Ready)]);
        let requests = |s: &mut Series, ordinal, n, at| {
            s.increase("server", ordinal, &counters(n, at)).requests
        };
        // The first read is a baseline.
        assert_eq!(requests(&mut s, 0, 100.0, -50.0), 0.0);
        s.retain(&v);
        assert_eq!(requests(&mut s, 0, 150.0, -50.0), 50.0);
        let i = s.increase("server", 0, &counters(160.0, -50.0));
        assert_eq!(
            (i.ttft_count, i.mean_ttft().map(|t| (t * 1e9).round())),
            (10.0, Some(1e8))
        );
        // The engine restarted: a new `started_at` counts from 0.
        assert_eq!(requests(&mut s, 0, 20.0, 40.0), 20.0);
        // A counter going down with the same `started_at` is a restart too.
        assert_eq!(requests(&mut s, 0, 5.0, 40.0), 5.0);
        assert_eq!(requests(&mut s, 0, 5.0, 40.0), 0.0);
        // A new replica after the first read counts from 0.
        assert_eq!(requests(&mut s, 1, 7.0, 60.0), 7.0);
        // Ordinal 1 is gone from the view: forgotten, so its return counts from 0 again
        // (a replica of the same ordinal is a new engine).
        s.retain(&v);
        assert_eq!(requests(&mut s, 1, 9.0, 60.0), 9.0);
        assert_eq!(Increase::default().mean_itl(), None);
    }
}
