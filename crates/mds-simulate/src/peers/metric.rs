//! The per-replica engine series a team's own autoscaler can be configured on (module
//! `file` maps the names teams write to them), and how a peer reads one: a gauge as the page
//! shows it, a counter as Prometheus' `rate()` over a window of the samples the peer took.

use std::collections::{BTreeMap, VecDeque};

use super::{Lifecycle, Replica, RoleView, Sample};

/// One engine series, per replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodMetric {
    /// Requests in the running batch (gauge).
    Running,
    /// Requests waiting (gauge).
    Waiting,
    /// Running plus waiting (the sum of the two gauges).
    QueueDepth,
    /// KV-cache usage, 0..1 (gauge).
    KvUsage,
    /// Finished requests per second (a counter's rate).
    RequestRate,
    /// Prompt tokens per second (a counter's rate).
    PromptTokenRate,
    /// Generated tokens per second (a counter's rate).
    GenerationTokenRate,
}

impl PodMetric {
    /// The series in words, for notes and knob texts.
    pub fn describe(self) -> &'static str {
        match self {
            PodMetric::Running => "running requests",
            PodMetric::Waiting => "waiting requests",
            PodMetric::QueueDepth => "running + waiting requests",
            PodMetric::KvUsage => "KV-cache usage",
            PodMetric::RequestRate => "requests/s",
            PodMetric::PromptTokenRate => "prompt tokens/s",
            PodMetric::GenerationTokenRate => "generated tokens/s",
        }
    }

    /// Whether the series is a counter (read as a rate).
    pub fn is_rate(self) -> bool {
        matches!(
            self,
            PodMetric::RequestRate | PodMetric::PromptTokenRate | PodMetric::GenerationTokenRate
        )
    }

    /// A gauge's value, or a counter's running total.
    pub fn raw(self, s: &Sample) -> f64 {
        match self {
            PodMetric::Running => s.running,
            PodMetric::Waiting => s.waiting,
            PodMetric::QueueDepth => s.queue_depth(),
            PodMetric::KvUsage => s.kv_usage,
            PodMetric::RequestRate => s.requests,
            PodMetric::PromptTokenRate => s.prompt_tokens,
            PodMetric::GenerationTokenRate => s.generation_tokens,
        }
    }
}

/// Reads one series off the replicas a peer sees: gauges as they are, counters as a rate over
/// `window_seconds` of the samples this reader took (the first sample of a replica, or the
/// first after its engine restarted, gives no rate yet).
#[derive(Clone, Debug)]
pub struct PodReader {
    pub metric: PodMetric,
    pub window_seconds: f64,
    /// Per (role, ordinal): the counter's samples inside the window.
    history: BTreeMap<(String, u32), VecDeque<CounterSample>>,
}

/// `(t, counter, started_at)`: one sample of a replica's counter and its engine's start.
type CounterSample = (f64, f64, f64);

impl PodReader {
    pub fn new(metric: PodMetric, window_seconds: f64) -> PodReader {
        PodReader {
            metric,
            window_seconds: window_seconds.max(1.0),
            history: BTreeMap::new(),
        }
    }

    /// Per ordinal, the value of every ready replica of `role` that has one at `t`.
    pub fn values(&mut self, t: f64, role: &RoleView) -> BTreeMap<u32, f64> {
        let mut out = BTreeMap::new();
        for replica in &role.replicas {
            if let Some(v) = self.value(t, &role.name, replica) {
                out.insert(replica.ordinal, v);
            }
        }
        out
    }

    fn value(&mut self, t: f64, role: &str, replica: &Replica) -> Option<f64> {
        if replica.state != Lifecycle::Ready {
            return None;
        }
        let sample = replica.sample.as_ref()?;
        let raw = self.metric.raw(sample);
        if !self.metric.is_rate() {
            return Some(raw);
        }
        let history = self
            .history
            .entry((role.to_string(), replica.ordinal))
            .or_default();
        // A restarted engine's counters start over: its older samples say nothing.
        if history
            .back()
            .is_some_and(|&(_, _, s)| s != sample.started_at)
        {
            history.clear();
        }
        if history.back().is_none_or(|&(last, _, _)| t > last) {
            history.push_back((t, raw, sample.started_at));
        }
        while history
            .front()
            .is_some_and(|&(first, _, _)| first < t - self.window_seconds - 1e-9)
        {
            history.pop_front();
        }
        let (&(t0, c0, _), &(t1, c1, _)) = (history.front()?, history.back()?);
        (t1 > t0).then(|| ((c1 - c0) / (t1 - t0)).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::testing::view;

    fn with_requests(ordinal: u32, requests: f64, started_at: f64) -> Replica {
        Replica {
            ordinal,
            state: Lifecycle::Ready,
            sample: Some(Sample {
                requests,
                running: 3.0,
                waiting: 2.0,
                started_at,
                ..Sample::default()
            }),
        }
    }

    #[test]
    fn a_gauge_is_read_as_it_is_and_only_on_ready_replicas() {
        let mut reader = PodReader::new(PodMetric::QueueDepth, 60.0);
        let mut starting = with_requests(1, 0.0, 0.0);
        starting.state = Lifecycle::Starting;
        let v = view(0.0, 2, 1, 4, vec![with_requests(0, 0.0, 0.0), starting]);
        assert_eq!(reader.values(0.0, &v.roles[0]), BTreeMap::from([(0, 5.0)]));
    }

    #[test]
    fn a_counter_is_a_rate_over_the_window_and_a_restart_starts_it_over() {
        let mut reader = PodReader::new(PodMetric::RequestRate, 30.0);
        let at =
            |t: f64, n: f64, started: f64| view(t, 1, 1, 4, vec![with_requests(0, n, started)]);
        assert!(reader.values(0.0, &at(0.0, 0.0, 0.0).roles[0]).is_empty());
        assert_eq!(reader.values(15.0, &at(15.0, 30.0, 0.0).roles[0])[&0], 2.0);
        // The sample at 0 leaves the 30 s window at 45: the rate is over 15..45.
        assert_eq!(reader.values(45.0, &at(45.0, 150.0, 0.0).roles[0])[&0], 4.0);
        // The engine restarted at 50: no rate until a second sample of the new process.
        assert!(
            reader
                .values(60.0, &at(60.0, 3.0, 50.0).roles[0])
                .is_empty()
        );
        assert_eq!(reader.values(75.0, &at(75.0, 33.0, 50.0).roles[0])[&0], 2.0);
    }
}
