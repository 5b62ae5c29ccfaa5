//! Knative Serving's KPA, re-implemented from `knative/serving` at `knative-v1.23.0`
//! (`pkg/autoscaler/scaling/autoscaler.go`, `aggregation/bucketing.go`,
//! `metrics/collector.go`, `config/config.go`; BASELINES.md section 2).
//!
//! Metric: the concurrency of a role, Σ (running + waiting) over its ready replicas that have
//! a sample, scraped every second (`sample_every`) into 1 s buckets of a 60 s stable and a
//! 6 s panic window; a scrape with no such replica records nothing, as Knative's empty
//! scrape does. Every 2 s tick, per role, the decider of `autoscaler.go` turns the window
//! means into a count: desired stable and panic pod counts against the per-replica target
//! `TV = target × 0.7`, each clamped by the rates, and panic mode, which holds the highest
//! count it reached until the surge has been out of the panic window for a stable window.
//!
//! Not modelled: scale to zero, the activator and burst capacity (a role keeps at least one
//! replica). The answer is clamped to the role's `[min, max]`, as the KPA reconciler applies
//! min- and max-scale.

use std::collections::{BTreeMap, VecDeque};

use super::metric::{PodMetric, PodReader};
use super::{Lifecycle, Peer, RoleTargets, Targets, View};

/// The autoscaler's configuration (Knative's defaults in [`Default`]).
#[derive(Clone, Debug, PartialEq)]
pub struct KnativeConfig {
    /// Seconds between decisions (`tickInterval`).
    pub tick_seconds: f64,
    /// Seconds between scrapes, and the width of one bucket (`BucketSize`).
    pub bucket_seconds: f64,
    pub stable_window_seconds: f64,
    /// The panic window as a percentage of the stable window.
    pub panic_window_percentage: f64,
    /// Panic when the panic-window pod count reaches this multiple of the ready count.
    pub panic_threshold: f64,
    pub max_scale_up_rate: f64,
    pub max_scale_down_rate: f64,
    /// The share of the per-replica target the autoscaler aims at.
    pub target_utilization: f64,
    /// Scale-down waits for the highest count decided within this many seconds (0: off).
    pub scale_down_delay_seconds: f64,
}

impl Default for KnativeConfig {
    fn default() -> Self {
        KnativeConfig {
            tick_seconds: 2.0,
            bucket_seconds: 1.0,
            stable_window_seconds: 60.0,
            panic_window_percentage: 10.0,
            panic_threshold: 2.0,
            max_scale_up_rate: 1000.0,
            max_scale_down_rate: 2.0,
            target_utilization: 0.7,
            scale_down_delay_seconds: 0.0,
        }
    }
}

impl KnativeConfig {
    fn panic_window_seconds(&self) -> f64 {
        self.stable_window_seconds * self.panic_window_percentage / 100.0
    }
}

/// Knative's KPA over every role that has a target.
pub struct KnativeKpa {
    config: KnativeConfig,
    /// Per-replica target per role, before utilization.
    targets: RoleTargets,
    /// The `rps` metric: each ready replica's request rate (`None`: concurrency, running +
    /// waiting requests).
    rps: Option<PodReader>,
    roles: BTreeMap<String, RoleState>,
}

struct RoleState {
    stable: Buckets,
    panic: Buckets,
    /// Made at the role's first decision, from the ready count then.
    decider: Option<Decider>,
}

impl KnativeKpa {
    /// From the per-role QueueDepth targets (roles without one are left alone).
    pub fn new(targets: &Targets) -> Self {
        Self::with_config(targets, KnativeConfig::default())
    }

    pub fn with_config(targets: &Targets, config: KnativeConfig) -> Self {
        Self::on(
            RoleTargets::PerRole(targets.queue_depth.clone()),
            false,
            config,
        )
    }

    /// On concurrency, or on requests per second (`rps`: each scrape's requests since the one
    /// before, as the queue-proxy reports them; the windows do the averaging), at `targets`
    /// per replica.
    pub fn on(targets: RoleTargets, rps: bool, config: KnativeConfig) -> Self {
        let reader = rps.then(|| PodReader::new(PodMetric::RequestRate, config.bucket_seconds));
        KnativeKpa {
            config,
            targets,
            rps: reader,
            roles: BTreeMap::new(),
        }
    }

    fn state(&mut self, role: &str) -> &mut RoleState {
        let config = &self.config;
        self.roles
            .entry(role.to_string())
            .or_insert_with(|| RoleState {
                stable: Buckets::new(config.stable_window_seconds, config.bucket_seconds),
                panic: Buckets::new(config.panic_window_seconds(), config.bucket_seconds),
                decider: None,
            })
    }
}

impl Peer for KnativeKpa {
    fn name(&self) -> String {
        "knative-kpa".into()
    }

    fn interval(&self) -> f64 {
        self.config.tick_seconds
    }

    fn sample_every(&self) -> Option<f64> {
        Some(self.config.bucket_seconds)
    }

    fn through_prometheus(&self) -> bool {
        false
    }

    fn observe(&mut self, view: &View) {
        for role in &view.roles {
            if self.targets.get(&role.name).is_none() {
                continue;
            }
            let concurrency: f64 = if let Some(reader) = &mut self.rps {
                let values = reader.values(view.t, role);
                if values.is_empty() {
                    continue;
                }
                values.values().sum()
            } else {
                let mut samples = role.ready_samples().peekable();
                if samples.peek().is_none() {
                    continue;
                }
                samples.map(|s| s.queue_depth()).sum()
            };
            let state = self.state(&role.name);
            state.stable.record(view.t, concurrency);
            state.panic.record(view.t, concurrency);
        }
    }

    fn decide(&mut self, view: &View) -> BTreeMap<String, i32> {
        let mut counts = BTreeMap::new();
        for role in &view.roles {
            let Some(target) = self.targets.get(&role.name) else {
                continue;
            };
            let target_value = target * self.config.target_utilization;
            let ready = role.count(Lifecycle::Ready);
            let config = self.config.clone();
            let state = self.state(&role.name);
            let decider = state
                .decider
                .get_or_insert_with(|| Decider::new(ready, view.t));
            // No data for a whole stable window: Knative's decider declines to scale.
            if state.stable.is_empty(view.t) {
                continue;
            }
            let stable = state.stable.average(view.t);
            let panic = state.panic.average(view.t);
            let desired = decider.scale(&config, target_value, ready, stable, panic, view.t);
            counts.insert(role.name.clone(), role.clamp(desired.max(1)));
        }
        counts
    }
}

/// The bucket a time falls in; a hair of slack so that a time computed as `k × width` in
/// floating point lands in bucket `k`.
fn bucket_index(t: f64, width: f64) -> i64 {
    (t / width + 1e-9).floor() as i64
}

/// Knative's timed buckets (`TimedFloat64Buckets`): values recorded in one bucket are summed;
/// the window mean is the sum of the buckets still in the window over the number of buckets
/// since the first write, at most the window's length. So a window younger than its length
/// is averaged over the buckets since the first observation (6 s of data in a 60 s window
/// is a mean of 6 buckets), and a bucket without a write after the first is a 0. A gap of a
/// whole window without writes starts over; reading after a shorter gap drops the buckets
/// that left the window and counts the missing seconds out of the length.
#[derive(Clone, Debug)]
struct Buckets {
    width: f64,
    /// Buckets in the window.
    len: i64,
    /// (bucket index, sum), ascending, none older than `len` before `last_write`.
    sums: VecDeque<(i64, f64)>,
    first_write: Option<i64>,
    last_write: Option<i64>,
}

impl Buckets {
    fn new(window_seconds: f64, width: f64) -> Self {
        Buckets {
            width,
            len: ((window_seconds / width).ceil() as i64).max(1),
            sums: VecDeque::new(),
            first_write: None,
            last_write: None,
        }
    }

    fn record(&mut self, t: f64, value: f64) {
        let index = bucket_index(t, self.width);
        if self.last_write != Some(index) {
            if self.last_write.is_some_and(|last| index + self.len <= last) {
                // More than a window before the newest write.
                return;
            }
            if self.first_write.is_none_or(|first| first > index) {
                self.first_write = Some(index);
            }
            if self.last_write.is_none_or(|last| index > last) {
                if self.last_write.is_none_or(|last| index - last >= self.len) {
                    self.sums.clear();
                    self.first_write = Some(index);
                }
                self.last_write = Some(index);
            }
        }
        match self.sums.binary_search_by_key(&index, |&(i, _)| i) {
            Ok(at) => self.sums[at].1 += value,
            Err(at) => self.sums.insert(at, (index, value)),
        }
        let oldest = self.last_write.unwrap_or(index) - self.len;
        while self.sums.front().is_some_and(|&(i, _)| i <= oldest) {
            self.sums.pop_front();
        }
    }

    /// Nothing written for longer than the window.
    fn is_empty(&self, t: f64) -> bool {
        self.last_write
            .is_none_or(|last| bucket_index(t, self.width) - last > self.len)
    }

    fn average(&self, t: f64) -> f64 {
        let (Some(first), Some(last)) = (self.first_write, self.last_write) else {
            return 0.0;
        };
        let now = bucket_index(t, self.width);
        let since_last = now - last;
        if since_last >= self.len {
            return 0.0;
        }
        let (total, room): (f64, i64) = if since_last <= 0 {
            (self.sums.iter().map(|&(_, v)| v).sum(), self.len)
        } else {
            let oldest = now - self.len;
            let total = self
                .sums
                .iter()
                .filter(|&&(i, _)| i > oldest)
                .map(|&(_, v)| v)
                .sum();
            (total, self.len - since_last)
        };
        let buckets = (last - first + 1).min(room);
        round_to_6_digits(total / buckets as f64)
    }
}

/// Knative rounds window means to 6 digits, which keeps float dust out of the ceilings.
fn round_to_6_digits(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The per-role decider of `autoscaler.go`: panic state and the scale-down delay.
#[derive(Clone, Debug)]
struct Decider {
    /// The last time the panic window was over the threshold (or the start, when it
    /// started in panic); `None`: not in panic.
    panic_time: Option<f64>,
    /// The highest count decided in this panic.
    max_panic_pods: i32,
    /// Counts decided within the scale-down delay: (tick index, count).
    delayed: VecDeque<(i64, i32)>,
}

impl Decider {
    /// A decider starts in panic when more than one replica is ready: it has no history yet
    /// and must not scale down on it.
    fn new(ready: i32, now: f64) -> Self {
        Decider {
            panic_time: (ready > 1).then_some(now),
            max_panic_pods: ready,
            delayed: VecDeque::new(),
        }
    }

    fn scale(
        &mut self,
        config: &KnativeConfig,
        target_value: f64,
        ready_count: i32,
        stable: f64,
        panic: f64,
        now: f64,
    ) -> i32 {
        let ready = f64::from(ready_count.max(1));
        // Always room for one more and one fewer pod, whatever the rates.
        let max_scale_up = (config.max_scale_up_rate * ready).ceil();
        let max_scale_down = (ready / config.max_scale_down_rate).floor();
        let dspc = (stable / target_value).ceil();
        let dppc = (panic / target_value).ceil();
        let desired_stable = dspc.max(max_scale_down).min(max_scale_up) as i32;
        let desired_panic = dppc.max(max_scale_down).min(max_scale_up) as i32;

        let over_threshold = dppc / ready >= config.panic_threshold;
        match self.panic_time {
            _ if over_threshold => self.panic_time = Some(now),
            Some(since) if since + config.stable_window_seconds < now => {
                // The surge has made its way into the stable window.
                self.panic_time = None;
                self.max_panic_pods = 0;
            }
            _ => {}
        }

        let mut desired = desired_stable;
        if self.panic_time.is_some() {
            // The stable window can be the higher one; provision for both, never lower.
            desired = desired.max(desired_panic).max(self.max_panic_pods);
            self.max_panic_pods = desired;
        }
        if config.scale_down_delay_seconds > 0.0 {
            desired = self.delay_scale_down(config, desired, now);
        }
        desired
    }

    /// The highest count decided within the delay (`max.TimeWindow` with tick buckets).
    fn delay_scale_down(&mut self, config: &KnativeConfig, desired: i32, now: f64) -> i32 {
        let buckets = (config.scale_down_delay_seconds / config.tick_seconds).ceil() as i64;
        let index = bucket_index(now, config.tick_seconds);
        match self.delayed.back_mut() {
            Some((i, count)) if *i == index => *count = (*count).max(desired),
            _ => self.delayed.push_back((index, desired)),
        }
        while self
            .delayed
            .front()
            .is_some_and(|&(i, _)| index - i >= buckets)
        {
            self.delayed.pop_front();
        }
        self.delayed
            .iter()
            .map(|&(_, c)| c)
            .max()
            .unwrap_or(desired)
    }
}

#[cfg(test)]
mod tests;
