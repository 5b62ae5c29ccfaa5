//! AIBrix's KPA and APA, re-implemented from `vllm-project/aibrix` at
//! `e3e10f9e4aebe9aac5e7d992fb87d2648e01628b` (`pkg/controller/podautoscaler/algorithm/kpa.go`,
//! `algorithm/apa.go`, `context/context.go`, `metrics/client.go`, `types/metrics.go`,
//! `podautoscaler_controller.go`; BASELINES.md section 3).
//!
//! Metric: one value per replica, KV-cache usage (target 0.5) or running plus waiting
//! requests (the QueueDepth target). Each sample, the values of the role's ready replicas
//! that have a sample are averaged and the mean is recorded into a 180 s stable and a 60 s
//! panic window of 1 s buckets; the window means are `S` and `P`. Every 10 s reconcile, per
//! role, with `N` the role's current count and `T` the target:
//!
//! - KPA: panic when `P / S > 2` or `S ≤ 0`, judged afresh each pass (the production scaling
//!   context forgets `maxPanicPods`). `dspc = ceil(S / T)` unless `S` is within
//!   `[0.9T, 1.1T]` (then `N`), likewise `dppc` from `P`; both clamped into
//!   `[floor(N / 2), max(1, ceil(2N))]`; in panic the larger.
//! - APA: `r = S / T`; above `1.1` grow to `ceil(N·r)`, at most `ceil(2N)`; below `0.9` shrink
//!   to `ceil(N·r)`, at least `floor(N / 2)`; else `N`.
//!
//! The recommendation, clamped to `[min, max]`, then passes the cooldown: above `N` it is the
//! highest recommendation of the 0 s up window (itself); below `N` the lowest of the 300 s down
//! window; then `[min, max]` again. A count outside the bounds is brought into them without a
//! pass, as upstream's boundary check does.
//!
//! Two upstream quirks sit behind [`AibrixSwitches`] and are reported both ways: the windows
//! hold a per-Pod mean while KPA divides by a per-Pod target as if it were a total, and the
//! down cooldown takes the minimum, so it never delays a scale-down.

use std::collections::{BTreeMap, VecDeque};

use super::metric::PodMetric;
use super::{Lifecycle, Peer, RoleView, Sample, Targets, View};

/// Which of AIBrix's algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AibrixAlgorithm {
    Kpa,
    Apa,
}

/// What each replica reports and its per-replica target.
#[derive(Clone, Debug, PartialEq)]
pub enum AibrixMetric {
    /// KV-cache usage, 0..1, against [`AibrixConfig::kv_usage_target`] on every role.
    KvUsage,
    /// Running plus waiting requests, against a target per role (roles without one are left
    /// alone).
    QueueDepth(BTreeMap<String, f64>),
    /// Another gauge a team configured (`targetMetric`), at one target on every role.
    Gauge(PodMetric, f64),
}

impl AibrixMetric {
    /// The QueueDepth metric with the Proportional run's per-replica targets.
    pub fn queue_depth(targets: &Targets) -> Self {
        AibrixMetric::QueueDepth(targets.queue_depth.clone())
    }

    fn value(&self, sample: &Sample) -> f64 {
        match self {
            AibrixMetric::KvUsage => sample.kv_usage,
            AibrixMetric::QueueDepth(_) => sample.queue_depth(),
            AibrixMetric::Gauge(metric, _) => metric.raw(sample),
        }
    }
}

/// The upstream quirks, each reproduced one way or the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AibrixSwitches {
    /// KPA multiplies `S` and `P` by the ready replica count before dividing by the
    /// per-replica target, as upstream's unit tests read them (a total). Off: the code as
    /// written, a per-Pod mean over a per-Pod target. APA ignores it (`N·S/T` is already
    /// per-Pod arithmetic).
    pub kpa_total: bool,
    /// The down cooldown takes the highest recommendation of its window, as HPA does, instead
    /// of the lowest.
    pub hpa_like_cooldown: bool,
}

impl Default for AibrixSwitches {
    fn default() -> Self {
        AibrixSwitches {
            kpa_total: true,
            hpa_like_cooldown: false,
        }
    }
}

/// The scaling context (AIBrix's defaults in [`Default`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AibrixConfig {
    /// Seconds between reconciles.
    pub reconcile_seconds: f64,
    /// Seconds between samples. The pinned commit records one snapshot per reconcile
    /// (`executeScalingPipeline`); BASELINES.md samples every second; setting this to
    /// `reconcile_seconds` reproduces the commit.
    pub sample_seconds: f64,
    /// The stable ("observe") and panic windows, and their bucket width.
    pub stable_window_seconds: f64,
    pub panic_window_seconds: f64,
    pub granularity_seconds: f64,
    pub up_tolerance: f64,
    pub down_tolerance: f64,
    pub max_scale_up_rate: f64,
    pub max_scale_down_rate: f64,
    /// KPA panics when `P / S` exceeds this.
    pub panic_threshold: f64,
    pub scale_up_cooldown_seconds: f64,
    pub scale_down_cooldown_seconds: f64,
    /// Per-replica KV-usage target (AIBrix's published evaluation used 50 %).
    pub kv_usage_target: f64,
}

impl Default for AibrixConfig {
    fn default() -> Self {
        AibrixConfig {
            reconcile_seconds: 10.0,
            sample_seconds: 1.0,
            stable_window_seconds: 180.0,
            panic_window_seconds: 60.0,
            granularity_seconds: 1.0,
            up_tolerance: 0.1,
            down_tolerance: 0.1,
            max_scale_up_rate: 2.0,
            max_scale_down_rate: 2.0,
            panic_threshold: 2.0,
            scale_up_cooldown_seconds: 0.0,
            scale_down_cooldown_seconds: 300.0,
            kv_usage_target: 0.5,
        }
    }
}

/// An AIBrix PodAutoscaler per role.
pub struct Aibrix {
    algorithm: AibrixAlgorithm,
    metric: AibrixMetric,
    switches: AibrixSwitches,
    config: AibrixConfig,
    roles: BTreeMap<String, RoleState>,
}

struct RoleState {
    stable: Window,
    panic: Window,
    cooldown: Cooldown,
}

impl Aibrix {
    pub fn new(algorithm: AibrixAlgorithm, metric: AibrixMetric, switches: AibrixSwitches) -> Self {
        Self::with_config(algorithm, metric, switches, AibrixConfig::default())
    }

    pub fn with_config(
        algorithm: AibrixAlgorithm,
        metric: AibrixMetric,
        switches: AibrixSwitches,
        config: AibrixConfig,
    ) -> Self {
        Aibrix {
            algorithm,
            metric,
            switches,
            config,
            roles: BTreeMap::new(),
        }
    }

    /// KPA with `switches`.
    pub fn kpa(metric: AibrixMetric, switches: AibrixSwitches) -> Self {
        Self::new(AibrixAlgorithm::Kpa, metric, switches)
    }

    /// APA with `switches`.
    pub fn apa(metric: AibrixMetric, switches: AibrixSwitches) -> Self {
        Self::new(AibrixAlgorithm::Apa, metric, switches)
    }

    fn target(&self, role: &RoleView) -> Option<f64> {
        match &self.metric {
            AibrixMetric::KvUsage => Some(self.config.kv_usage_target),
            AibrixMetric::QueueDepth(targets) => targets.get(&role.name).copied(),
            AibrixMetric::Gauge(_, target) => Some(*target),
        }
    }

    fn state(&mut self, role: &str) -> &mut RoleState {
        let config = &self.config;
        self.roles
            .entry(role.to_string())
            .or_insert_with(|| RoleState {
                stable: Window::new(config.stable_window_seconds, config.granularity_seconds),
                panic: Window::new(config.panic_window_seconds, config.granularity_seconds),
                cooldown: Cooldown::default(),
            })
    }

    /// The count one pass writes for `role`, or `None` when it writes nothing.
    fn pass(&mut self, role: &RoleView, now: f64) -> Option<i32> {
        let target = self.target(role).filter(|&t| t > 0.0)?;
        let n = role.desired;
        if n == 0 && role.min != 0 {
            // Upstream disables scaling of a target at zero replicas.
            return None;
        }
        if role.clamp(n) != n {
            return Some(role.clamp(n));
        }
        let ready = role.count(Lifecycle::Ready).max(1);
        let (algorithm, switches, config) = (self.algorithm, self.switches, self.config.clone());
        let state = self.state(&role.name);
        // Before any sample there is nothing to scale on (upstream would read 0 and halve).
        if state.stable.is_empty() {
            return None;
        }
        let (stable, panic) = (state.stable.average(), state.panic.average());
        let recommendation = match algorithm {
            AibrixAlgorithm::Kpa => {
                let per_pod_to_total = if switches.kpa_total {
                    f64::from(ready)
                } else {
                    1.0
                };
                kpa_desired(
                    &config,
                    n,
                    stable * per_pod_to_total,
                    panic * per_pod_to_total,
                    target,
                )
            }
            AibrixAlgorithm::Apa => apa_desired(&config, n, stable, target),
        };
        let recommendation = role.clamp(recommendation);
        let stabilized =
            state
                .cooldown
                .stabilize(&config, switches.hpa_like_cooldown, recommendation, n, now);
        Some(role.clamp(stabilized))
    }
}

impl Peer for Aibrix {
    fn name(&self) -> String {
        let mut name = match self.algorithm {
            AibrixAlgorithm::Kpa => "aibrix-kpa",
            AibrixAlgorithm::Apa => "aibrix-apa",
        }
        .to_string();
        if matches!(self.metric, AibrixMetric::QueueDepth(_)) {
            name.push_str("-queue");
        }
        if self.algorithm == AibrixAlgorithm::Kpa && !self.switches.kpa_total {
            name.push_str("-as-written");
        }
        if self.switches.hpa_like_cooldown {
            name.push_str("-hpa-cooldown");
        }
        name
    }

    fn interval(&self) -> f64 {
        self.config.reconcile_seconds
    }

    fn sample_every(&self) -> Option<f64> {
        Some(self.config.sample_seconds)
    }

    fn through_prometheus(&self) -> bool {
        false
    }

    fn observe(&mut self, view: &View) {
        for role in &view.roles {
            if self.target(role).is_none() {
                continue;
            }
            let values: Vec<f64> = role.ready_samples().map(|s| self.metric.value(s)).collect();
            if values.is_empty() {
                continue;
            }
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let state = self.state(&role.name);
            state.stable.record(view.t, mean);
            state.panic.record(view.t, mean);
        }
    }

    fn decide(&mut self, view: &View) -> BTreeMap<String, i32> {
        view.roles
            .iter()
            .filter_map(|role| Some((role.name.clone(), self.pass(role, view.t)?)))
            .collect()
    }
}

/// The bucket a time falls in; a hair of slack so that a time computed as `k × width` in
/// floating point lands in bucket `k`.
fn bucket_index(t: f64, width: f64) -> i64 {
    (t / width + 1e-9).floor() as i64
}

/// AIBrix's `TimeWindow`: one value per bucket (a later record in the same bucket replaces
/// it), buckets older than the window before the newest record dropped when recording (the
/// bucket exactly a window old stays, so 180 s at 1 s holds 181), and the mean taken over the
/// values present. Nothing ages out between records.
#[derive(Clone, Debug)]
struct Window {
    seconds: f64,
    width: f64,
    /// (bucket index, value), ascending.
    values: VecDeque<(i64, f64)>,
}

impl Window {
    fn new(seconds: f64, width: f64) -> Self {
        Window {
            seconds,
            width,
            values: VecDeque::new(),
        }
    }

    fn record(&mut self, t: f64, value: f64) {
        let index = bucket_index(t, self.width);
        match self.values.binary_search_by_key(&index, |&(i, _)| i) {
            Ok(at) => self.values[at].1 = value,
            Err(at) => self.values.insert(at, (index, value)),
        }
        let cutoff = bucket_index(t - self.seconds, self.width);
        while self.values.front().is_some_and(|&(i, _)| i < cutoff) {
            self.values.pop_front();
        }
    }

    fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn average(&self) -> f64 {
        if self.values.is_empty() {
            return 0.0;
        }
        self.values.iter().map(|&(_, v)| v).sum::<f64>() / self.values.len() as f64
    }

    #[cfg(test)]
    fn values(&self) -> Vec<f64> {
        self.values.iter().map(|&(_, v)| v).collect()
    }
}

/// KPA's recommendation for `n` replicas from window means `stable` and `panic` against the
/// per-replica `target` (`computeTargetReplicas`), before `[min, max]`.
fn kpa_desired(config: &AibrixConfig, n: i32, stable: f64, panic: f64, target: f64) -> i32 {
    let in_panic = stable <= 0.0 || panic / stable > config.panic_threshold;
    let pods = f64::from(n.max(0));
    let max_scale_up = (config.max_scale_up_rate * pods).ceil().max(1.0);
    let max_scale_down = (pods / config.max_scale_down_rate).floor();
    let scale_up_threshold = target * (1.0 + config.up_tolerance);
    let scale_down_threshold = target * (1.0 - config.down_tolerance);
    let wanted = |observed: f64| {
        if observed > scale_up_threshold || observed < scale_down_threshold {
            (observed / target).ceil()
        } else {
            f64::from(n)
        }
    };
    let desired_stable = wanted(stable).max(max_scale_down).min(max_scale_up) as i32;
    let desired_panic = wanted(panic).max(max_scale_down).min(max_scale_up) as i32;
    if in_panic {
        // Provision for both windows; with no panic memory, this pass's larger one.
        desired_stable.max(desired_panic)
    } else {
        desired_stable
    }
}

/// APA's recommendation for `n` replicas from the stable mean against the per-replica
/// `target`, before `[min, max]`.
fn apa_desired(config: &AibrixConfig, n: i32, stable: f64, target: f64) -> i32 {
    if target <= 0.0 {
        return n;
    }
    let pods = f64::from(n);
    let ratio = stable / target;
    if ratio > 1.0 + config.up_tolerance {
        let max_scale_up = (config.max_scale_up_rate * pods).ceil() as i32;
        ((pods * ratio).ceil() as i32).min(max_scale_up)
    } else if ratio < 1.0 - config.down_tolerance {
        let max_scale_down = (pods / config.max_scale_down_rate).floor() as i32;
        ((pods * ratio).ceil() as i32).max(max_scale_down)
    } else {
        n
    }
}

/// The controller's recommendation history (`stabilizeRecommendation`).
#[derive(Clone, Debug, Default)]
struct Cooldown {
    /// (time, recommendation), oldest first.
    history: VecDeque<(f64, i32)>,
}

impl Cooldown {
    fn stabilize(
        &mut self,
        config: &AibrixConfig,
        hpa_like: bool,
        recommendation: i32,
        current: i32,
        now: f64,
    ) -> i32 {
        self.history.push_back((now, recommendation));
        let longest = config
            .scale_up_cooldown_seconds
            .max(config.scale_down_cooldown_seconds);
        while self
            .history
            .front()
            .is_some_and(|&(t, _)| t <= now - longest)
        {
            self.history.pop_front();
        }
        let (window, pick_highest) = match recommendation.cmp(&current) {
            std::cmp::Ordering::Equal => return current,
            std::cmp::Ordering::Greater => (config.scale_up_cooldown_seconds, true),
            std::cmp::Ordering::Less => (config.scale_down_cooldown_seconds, hpa_like),
        };
        let inside = self
            .history
            .iter()
            .filter(|&&(t, _)| t > now - window)
            .map(|&(_, r)| r);
        let picked = if pick_highest {
            inside.max()
        } else {
            inside.min()
        };
        // An empty window (the 0 s up window) passes the recommendation itself.
        let picked = picked.unwrap_or(recommendation);
        if hpa_like && recommendation < current {
            // HPA lowers the count to the window's highest, never raises it.
            picked.min(current)
        } else {
            picked
        }
    }
}

#[cfg(test)]
mod tests;
