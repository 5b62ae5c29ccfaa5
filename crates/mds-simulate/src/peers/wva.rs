//! The llm-d Workload Variant Autoscaler in saturation mode, re-implemented from
//! `llm-d/llm-d-workload-variant-autoscaler`'s `docs/saturation-analyzer.md`,
//! `docs/saturation-scaling-config.md` and `docs/user-guide/configuration.md` (BASELINES.md
//! section 5).
//!
//! Inputs: each ready replica's KV-cache usage and queue length (waiting requests), as
//! `max_over_time[1m]` of the 15 s Prometheus scrapes. Every 60 s cycle, per role (one variant
//! per role):
//!
//! - a replica is saturated when KV ≥ 0.80 or queue ≥ 5;
//! - over the non-saturated replicas, spare KV = 0.80 − KV and spare queue = 5 − queue,
//!   averaged; +1 when the average spare KV is under 0.10 or the average spare queue under 3,
//!   and +1 when every ready replica is saturated (*unverified* upstream: our choice);
//! - otherwise −1 when at least two replicas are not saturated and, with their total KV and
//!   queue spread over one replica fewer, both spares stay at or above those triggers;
//! - no +1 while a replica of the role is pending or starting (the count above the ready
//!   replicas): growth already asked for is not asked for again (*unverified* upstream: our
//!   reading of "pending replicas are counted").
//!
//! WVA only publishes a desired count; HPA or KEDA actuates it. [`Wva::direct`] writes it;
//! [`Wva::behind_hpa`] passes it through HPA's default behaviour on HPA's 15 s sync, as
//! users run it (HPA's stabilization visibly reshapes WVA ramps: llm-d/llm-d-autoscaling#777).

use std::collections::{BTreeMap, VecDeque};

use super::hpa::{Behavior, HpaBehavior, SYNC_SECONDS};
use super::{Lifecycle, Peer, RoleView, View};

/// The saturation thresholds (WVA's defaults in [`Default`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    pub kv_cache: f64,
    pub queue_length: f64,
    pub kv_spare_trigger: f64,
    pub queue_spare_trigger: f64,
    /// `GLOBAL_OPT_INTERVAL`.
    pub cycle_seconds: f64,
    /// The `max_over_time` window.
    pub window_seconds: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            kv_cache: 0.80,
            queue_length: 5.0,
            kv_spare_trigger: 0.10,
            queue_spare_trigger: 3.0,
            cycle_seconds: 60.0,
            window_seconds: 60.0,
        }
    }
}

/// The saturation analysis of one role from each ready replica's (KV, queue) maxima: the
/// change it asks for, −1, 0 or +1.
pub fn analyse(th: &Thresholds, replicas: &[(f64, f64)], growth_in_flight: bool) -> i32 {
    if replicas.is_empty() {
        return 0;
    }
    let free: Vec<&(f64, f64)> = replicas
        .iter()
        .filter(|(kv, q)| *kv < th.kv_cache && *q < th.queue_length)
        .collect();
    let wants_up = if free.is_empty() {
        true
    } else {
        let n = free.len() as f64;
        let spare_kv = free.iter().map(|(kv, _)| th.kv_cache - kv).sum::<f64>() / n;
        let spare_q = free.iter().map(|(_, q)| th.queue_length - q).sum::<f64>() / n;
        spare_kv < th.kv_spare_trigger || spare_q < th.queue_spare_trigger
    };
    if wants_up {
        return if growth_in_flight { 0 } else { 1 };
    }
    if free.len() >= 2 {
        let fewer = (free.len() - 1) as f64;
        let kv = free.iter().map(|(kv, _)| kv).sum::<f64>() / fewer;
        let q = free.iter().map(|(_, q)| q).sum::<f64>() / fewer;
        if th.kv_cache - kv >= th.kv_spare_trigger && th.queue_length - q >= th.queue_spare_trigger
        {
            return -1;
        }
    }
    0
}

/// One replica's scrapes of the window: when, KV usage, queue length.
type Scrapes = VecDeque<(f64, f64, f64)>;

/// WVA in saturation mode, one variant per role.
pub struct Wva {
    thresholds: Thresholds,
    /// `Some`: actuated by HPA with its default behaviour.
    hpa: Option<Behavior>,
    /// Per (role, ordinal): the scrapes of the last window (when, KV, queue).
    scrapes: BTreeMap<(String, u32), Scrapes>,
    /// The count each role's last cycle published, and when the cycle ran.
    published: BTreeMap<String, i32>,
    last_cycle: Option<f64>,
}

impl Wva {
    /// WVA writing its desired count directly.
    pub fn direct() -> Wva {
        Wva::with(Thresholds::default(), None)
    }

    /// WVA's desired count actuated through HPA's default behaviour.
    pub fn behind_hpa() -> Wva {
        Wva::with(
            Thresholds::default(),
            Some(Behavior::new(HpaBehavior::default())),
        )
    }

    pub fn with(thresholds: Thresholds, hpa: Option<Behavior>) -> Wva {
        Wva {
            thresholds,
            hpa,
            scrapes: BTreeMap::new(),
            published: BTreeMap::new(),
            last_cycle: None,
        }
    }

    /// Each ready replica's maxima over the window.
    fn maxima(&self, role: &RoleView) -> Vec<(f64, f64)> {
        role.replicas
            .iter()
            .filter(|r| r.state == Lifecycle::Ready)
            .filter_map(|r| {
                let seen = self.scrapes.get(&(role.name.clone(), r.ordinal))?;
                let kv = seen.iter().map(|s| s.1).fold(f64::NAN, f64::max);
                let q = seen.iter().map(|s| s.2).fold(f64::NAN, f64::max);
                (!seen.is_empty()).then_some((kv, q))
            })
            .collect()
    }

    fn cycle(&mut self, view: &View) {
        for role in &view.roles {
            let ready = role.count(Lifecycle::Ready);
            let in_flight = role.count(Lifecycle::Pending) + role.count(Lifecycle::Starting) > 0
                || role.desired > ready;
            let change = analyse(&self.thresholds, &self.maxima(role), in_flight);
            self.published
                .insert(role.name.clone(), role.clamp(role.desired + change));
        }
    }
}

impl Peer for Wva {
    fn name(&self) -> String {
        if self.hpa.is_some() { "wva-hpa" } else { "wva" }.into()
    }

    fn interval(&self) -> f64 {
        if self.hpa.is_some() {
            SYNC_SECONDS
        } else {
            self.thresholds.cycle_seconds
        }
    }

    fn sample_every(&self) -> Option<f64> {
        Some(crate::peer_drive::SCRAPE_SECONDS)
    }

    fn through_prometheus(&self) -> bool {
        true
    }

    fn observe(&mut self, view: &View) {
        let window = self.thresholds.window_seconds;
        for role in &view.roles {
            for r in &role.replicas {
                if let (Lifecycle::Ready, Some(s)) = (r.state, r.sample) {
                    self.scrapes
                        .entry((role.name.clone(), r.ordinal))
                        .or_default()
                        .push_back((view.t, s.kv_usage, s.waiting));
                }
            }
        }
        self.scrapes.retain(|_, seen| {
            while seen.front().is_some_and(|(at, _, _)| view.t - at >= window) {
                seen.pop_front();
            }
            !seen.is_empty()
        });
    }

    fn decide(&mut self, view: &View) -> BTreeMap<String, i32> {
        if self
            .last_cycle
            .is_none_or(|at| view.t - at >= self.thresholds.cycle_seconds)
        {
            self.cycle(view);
            self.last_cycle = Some(view.t);
        }
        let mut out = BTreeMap::new();
        for role in &view.roles {
            let Some(&desired) = self.published.get(&role.name) else {
                continue;
            };
            let n = match &mut self.hpa {
                Some(hpa) => hpa.apply(
                    &role.name,
                    view.t,
                    role.desired,
                    desired,
                    role.min,
                    role.max,
                ),
                None => desired,
            };
            out.insert(role.name.clone(), n);
        }
        // A published count is acted on once by a direct writer (the next cycle publishes
        // anew); HPA reads the published metric at every sync.
        if self.hpa.is_none() {
            self.published.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::testing::{replica, view};
    use crate::peers::{Replica, Sample};

    fn at(ordinal: u32, kv: f64, waiting: f64) -> Replica {
        Replica {
            ordinal,
            state: Lifecycle::Ready,
            sample: Some(Sample {
                kv_usage: kv,
                waiting,
                ..Sample::default()
            }),
        }
    }

    /// The rules of `docs/saturation-analyzer.md` and the defaults of
    /// `docs/saturation-scaling-config.md` (llm-d/llm-d-workload-variant-autoscaler).
    #[test]
    fn the_saturation_table() {
        let th = Thresholds::default();
        // (name, each replica's (KV, queue) maxima, growth in flight, expected change)
        type Case = (&'static str, Vec<(f64, f64)>, bool, i32);
        let cases: [Case; 9] = [
            (
                "spare KV under 0.10 on average",
                vec![(0.75, 0.0), (0.72, 0.0)],
                false,
                1,
            ),
            (
                "spare queue under 3 on average",
                vec![(0.3, 3.0), (0.3, 2.5)],
                false,
                1,
            ),
            (
                "plenty of spare: one replica cannot shrink",
                vec![(0.1, 0.0)],
                false,
                0,
            ),
            (
                "two light replicas fit in one",
                vec![(0.2, 0.0), (0.3, 1.0)],
                false,
                -1,
            ),
            // 0.4 + 0.35 over one replica is 0.75: spare 0.05 < 0.10.
            (
                "two that would not fit in one",
                vec![(0.4, 0.0), (0.35, 0.0)],
                false,
                0,
            ),
            // Queues 1 + 1.5 over one is 2.5: spare 2.5 < 3.
            (
                "queues that would not fit in one",
                vec![(0.1, 1.0), (0.1, 1.5)],
                false,
                0,
            ),
            (
                "every replica saturated",
                vec![(0.85, 0.0), (0.3, 6.0)],
                false,
                1,
            ),
            (
                "growth in flight: no second +1",
                vec![(0.75, 0.0), (0.72, 0.0)],
                true,
                0,
            ),
            // A saturated replica is left out of the averages: the other one has room.
            (
                "a saturated one beside a free one",
                vec![(0.9, 0.0), (0.1, 0.0)],
                false,
                0,
            ),
        ];
        for (name, replicas, in_flight, expected) in cases {
            assert_eq!(analyse(&th, &replicas, in_flight), expected, "{name}");
        }
    }

    #[test]
    fn a_spike_counts_for_a_minute_and_a_start_is_not_repeated() {
        let mut wva = Wva::direct();
        // A 0.9 KV spike at 0 s, quiet after: the cycle at 45 s still sees it (saturated,
        // the other replica has room, so nothing), at 60 s it has left the window and the
        // two light replicas fit in one.
        wva.observe(&view(0.0, 2, 1, 8, vec![at(0, 0.9, 0.0), at(1, 0.1, 0.0)]));
        for t in [15.0, 30.0, 45.0] {
            wva.observe(&view(t, 2, 1, 8, vec![at(0, 0.1, 0.0), at(1, 0.1, 0.0)]));
        }
        let quiet = |t| view(t, 2, 1, 8, vec![at(0, 0.1, 0.0), at(1, 0.1, 0.0)]);
        assert_eq!(wva.decide(&quiet(45.0))["server"], 2);
        wva.observe(&quiet(60.0));
        assert_eq!(wva.decide(&quiet(105.0))["server"], 1);

        // Hot with a replica starting: no +1 until it is ready; then both hot: +1.
        let mut wva = Wva::direct();
        let hot_starting = view(
            0.0,
            2,
            1,
            8,
            vec![at(0, 0.79, 0.0), replica(1, Lifecycle::Starting)],
        );
        wva.observe(&hot_starting);
        assert_eq!(wva.decide(&hot_starting)["server"], 2);
        let hot = view(60.0, 2, 1, 8, vec![at(0, 0.79, 0.0), at(1, 0.79, 0.0)]);
        wva.observe(&hot);
        assert_eq!(wva.decide(&hot)["server"], 3);
    }

    #[test]
    fn behind_hpa_the_scale_down_waits_for_the_stabilization_window() {
        let mut wva = Wva::behind_hpa();
        // Hot first (WVA publishes 4 from 3), then light: HPA keeps 4 for 300 s.
        let hot = view(0.0, 3, 1, 8, (0..3).map(|i| at(i, 0.79, 0.0)).collect());
        wva.observe(&hot);
        assert_eq!(wva.decide(&hot)["server"], 4);
        let light4 = |t| view(t, 4, 1, 8, (0..4).map(|i| at(i, 0.05, 0.0)).collect());
        let mut t = 15.0;
        let mut down_at = None;
        while t <= 600.0 && down_at.is_none() {
            wva.observe(&light4(t));
            if wva.decide(&light4(t))["server"] < 4 {
                down_at = Some(t);
            }
            t += 15.0;
        }
        // WVA published 4 until its next cycle at 60 s, so HPA recommended 4 at each sync up
        // to 45 s; its 300 s window lets go of the last one at 345 s.
        assert_eq!(down_at, Some(345.0), "HPA's 300 s window holds WVA's 4");
        // Direct, the same sequence shrinks at WVA's next cycle.
        let mut direct = Wva::direct();
        direct.observe(&hot);
        assert_eq!(direct.decide(&hot)["server"], 4);
        direct.observe(&light4(60.0));
        assert_eq!(direct.decide(&light4(60.0))["server"], 3);
    }
}
