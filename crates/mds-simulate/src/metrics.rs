//! What a run did against its demand (BASELINES section 9, items 3 to 7), each role's ready
//! capacity measured at its knee (what one replica serves within the SLO at the run's goal):
//!
//! - over-provisioning: ready capacity-seconds over demanded capacity-seconds;
//! - under-provisioning: replica-seconds of demand no ready replica covered,
//!   `∫ max(0, demand / knee − ready) dt`, and the minutes in deficit (a minute whose mean
//!   demand exceeds its mean ready capacity);
//! - reaction: after each demand step (a minute whose demand exceeds each of the five before it
//!   by more than one replica's knee, and its ready capacity at its start), the seconds until
//!   ready capacity covers that minute's demand;
//! - lead time: each time demand (a minute's moving mean) rises past what `k - 1` replicas
//!   serve, when the `k`-th replica was ready: the crossing's time less the ready time,
//!   positive when the replica was ready first;
//! - churn: Σ|Δreplicas| over every write;
//! - the share of time the written counts lie inside every ratio band;
//! - forecast sMAPE at the horizon (Predictive), and a last-value predictor's on the same
//!   passes: `mean(2 |F − A| / (|F| + |A|))`, `A` the demand the filter took at the first pass
//!   at or after the horizon.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::PassRecord;
use crate::oracle::{Band, in_band};

/// Counts per role.
pub type Counts = BTreeMap<String, i32>;

/// The written and ready counts as they changed: (seconds since the start, written, ready).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Timeline {
    pub points: Vec<(f64, Counts, Counts)>,
}

impl Timeline {
    /// Records the counts from `t` on (kept only when they changed).
    pub fn record(
        &mut self,
        t: f64,
        replicas: &BTreeMap<String, i32>,
        ready: &BTreeMap<String, i32>,
    ) {
        if self
            .points
            .last()
            .is_some_and(|(_, r, d)| r == replicas && d == ready)
        {
            return;
        }
        self.points.push((t, replicas.clone(), ready.clone()));
    }

    /// A role's mean ready replicas per bin of `bin` seconds over `bins` bins.
    fn ready(&self, role: &str, bin: f64, bins: usize) -> Vec<f64> {
        let mut out = vec![0.0; bins];
        for (i, (t, _, ready)) in self.points.iter().enumerate() {
            let end = self.points.get(i + 1).map_or(bin * bins as f64, |p| p.0);
            let n = f64::from(ready.get(role).copied().unwrap_or(0));
            let mut at = *t;
            while at < end {
                let b = (at / bin) as usize;
                if b >= bins {
                    break;
                }
                let edge = ((b + 1) as f64 * bin).min(end);
                out[b] += n * (edge - at) / bin;
                at = edge;
            }
        }
        out
    }

    /// The share of `duration` the written counts lie inside every band (roles in `order`).
    fn in_bands(&self, order: &[String], bands: &[Band], duration: f64) -> f64 {
        if duration <= 0.0 {
            return 1.0;
        }
        let mut inside = 0.0;
        for (i, (t, replicas, _)) in self.points.iter().enumerate() {
            let end = self
                .points
                .get(i + 1)
                .map_or(duration, |p| p.0)
                .min(duration);
            let v: Vec<i32> = order
                .iter()
                .map(|r| replicas.get(r).copied().unwrap_or(0))
                .collect();
            if bands.iter().all(|b| in_band(b, &v)) {
                inside += (end - t).max(0.0);
            }
        }
        inside / duration
    }
}

/// One run's provisioning, reaction, churn, band and forecast metrics.
#[derive(Clone, Debug, PartialEq, Serialize, Default)]
pub struct Metrics {
    /// Ready capacity-seconds over demanded capacity-seconds (`None` without a knee).
    pub over_provisioning: Option<f64>,
    pub under_provisioned_replica_seconds: Option<f64>,
    pub deficit_minutes: Option<u32>,
    /// Seconds from each demand step until ready capacity covered it.
    pub reactions_seconds: Vec<f64>,
    /// Seconds each rising crossing came after its replica was ready (positive: early).
    pub leads_seconds: Vec<f64>,
    /// Σ|Δreplicas| over every write, all roles.
    pub replica_changes: u32,
    /// Share of the run the written counts lie inside every ratio band (`None` without one).
    pub in_band_share: Option<f64>,
    /// Predictive's sMAPE at its horizon, and a last-value predictor's on the same passes.
    pub forecast_smape: Option<f64>,
    pub last_value_smape: Option<f64>,
}

impl Metrics {
    pub fn mean_reaction(&self) -> Option<f64> {
        mean(&self.reactions_seconds)
    }

    pub fn mean_lead(&self) -> Option<f64> {
        mean(&self.leads_seconds)
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// What a role's metrics are made from.
pub struct RoleInput<'a> {
    pub role: &'a str,
    /// Demand in tokens/s per bin of [`Input::bin`].
    pub demand: &'a [f64],
    /// Tokens/s one replica serves (its knee).
    pub knee: f64,
}

/// What the metrics of a run are made from.
pub struct Input<'a> {
    pub bin: f64,
    pub duration: f64,
    pub roles: Vec<RoleInput<'a>>,
    /// Every policy role, in the bands' order, and the bands.
    pub order: &'a [String],
    pub bands: &'a [Band],
}

/// The metrics of a run (module documentation).
pub fn of(input: &Input, timeline: &Timeline, passes: &[PassRecord]) -> Metrics {
    let mut m = Metrics {
        replica_changes: replica_changes(passes),
        in_band_share: (!input.bands.is_empty())
            .then(|| timeline.in_bands(input.order, input.bands, input.duration)),
        ..Metrics::default()
    };
    let (forecast, last_value) = forecast_smape(passes);
    m.forecast_smape = forecast;
    m.last_value_smape = last_value;
    let roles: Vec<&RoleInput> = input.roles.iter().filter(|r| r.knee > 0.0).collect();
    if roles.is_empty() {
        return m;
    }
    let bins = (input.duration / input.bin).ceil().max(1.0) as usize;
    let per_minute = (60.0 / input.bin).round().max(1.0) as usize;
    let (mut capacity, mut demanded, mut short) = (0.0, 0.0, 0.0);
    let mut deficit = vec![false; bins.div_ceil(per_minute)];
    for r in &roles {
        let ready = timeline.ready(r.role, input.bin, bins);
        let demand: Vec<f64> = (0..bins)
            .map(|b| r.demand.get(b).copied().unwrap_or(0.0))
            .collect();
        for b in 0..bins {
            capacity += ready[b] * r.knee * input.bin;
            demanded += demand[b] * input.bin;
            short += (demand[b] / r.knee - ready[b]).max(0.0) * input.bin;
        }
        let minute = |v: &[f64], m: usize| -> f64 {
            let chunk = &v[m * per_minute..((m + 1) * per_minute).min(v.len())];
            chunk.iter().sum::<f64>() / chunk.len().max(1) as f64
        };
        let minutes = deficit.len();
        let demand_min: Vec<f64> = (0..minutes).map(|i| minute(&demand, i)).collect();
        let ready_min: Vec<f64> = (0..minutes).map(|i| minute(&ready, i)).collect();
        for i in 0..minutes {
            if demand_min[i] > ready_min[i] * r.knee + 1e-9 {
                deficit[i] = true;
            }
        }
        m.reactions_seconds.extend(reactions(
            &demand_min,
            &ready,
            r.knee,
            input.bin,
            per_minute,
        ));
        m.leads_seconds
            .extend(leads(&demand, &ready, r.knee, input.bin, per_minute));
    }
    m.over_provisioning = (demanded > 0.0).then(|| capacity / demanded);
    m.under_provisioned_replica_seconds = Some(short);
    m.deficit_minutes = Some(deficit.iter().filter(|d| **d).count() as u32);
    m
}

/// Σ|Δreplicas| over the passes.
fn replica_changes(passes: &[PassRecord]) -> u32 {
    let mut previous: Option<&BTreeMap<String, i32>> = None;
    let mut total = 0;
    for p in passes {
        if let Some(before) = previous {
            for (role, n) in &p.replicas {
                total += (n - before.get(role).copied().unwrap_or(*n)).unsigned_abs();
            }
        }
        previous = Some(&p.replicas);
    }
    total
}

/// The seconds from each demand step until ready capacity covered it (module documentation);
/// a step still uncovered at the end counts until the end.
fn reactions(
    demand_min: &[f64],
    ready: &[f64],
    knee: f64,
    bin: f64,
    per_minute: usize,
) -> Vec<f64> {
    let mut out = Vec::new();
    for m in 5..demand_min.len() {
        let before = demand_min[m - 5..m].iter().copied().fold(0.0, f64::max);
        let start = m * per_minute;
        let ready_then = ready.get(start).copied().unwrap_or(0.0);
        if demand_min[m] <= before + knee || demand_min[m] <= ready_then * knee {
            continue;
        }
        let covered = (start..ready.len()).find(|&b| ready[b] * knee >= demand_min[m]);
        out.push((covered.unwrap_or(ready.len()) - start) as f64 * bin);
    }
    out
}

/// Lead times of rising crossings (module documentation).
fn leads(demand: &[f64], ready: &[f64], knee: f64, bin: f64, per_minute: usize) -> Vec<f64> {
    // A minute's moving mean, so a single busy bin is not a crossing.
    let smooth: Vec<f64> = (0..demand.len())
        .map(|b| {
            let from = b.saturating_sub(per_minute - 1);
            demand[from..=b].iter().sum::<f64>() / (b - from + 1) as f64
        })
        .collect();
    let mut out = Vec::new();
    for b in 1..smooth.len() {
        let (was, now) = (smooth[b - 1] / knee, smooth[b] / knee);
        // Each whole level crossed upward (was <= level < now) needs one replica more.
        for level in (was.ceil().max(1.0) as i64)..(now.ceil() as i64) {
            let level = level as f64;
            if !(was <= level && level < now) {
                continue;
            }
            let k = level + 1.0;
            let lead = if ready[b] >= k - 1e-9 {
                // Ready before: since when.
                let since = (0..=b)
                    .rev()
                    .find(|&i| ready[i] < k - 1e-9)
                    .map_or(0, |i| i + 1);
                (b - since) as f64 * bin
            } else {
                let at = (b..ready.len())
                    .find(|&i| ready[i] >= k - 1e-9)
                    .unwrap_or(ready.len());
                -((at - b) as f64 * bin)
            };
            out.push(lead);
        }
    }
    out
}

/// Predictive's sMAPE at its horizon and a last-value predictor's, over the passes that made
/// a forecast whose horizon a later pass reached.
fn forecast_smape(passes: &[PassRecord]) -> (Option<f64>, Option<f64>) {
    let smape = |f: f64, a: f64| {
        let d = f.abs() + a.abs();
        if d > 0.0 {
            2.0 * (f - a).abs() / d
        } else {
            0.0
        }
    };
    let (mut forecast, mut last, mut n) = (0.0, 0.0, 0_usize);
    for (i, p) in passes.iter().enumerate() {
        for (role, f) in &p.forecasts {
            let due = p.t + f.horizon_seconds;
            let actual = passes[i + 1..]
                .iter()
                .filter(|q| q.t >= due - 1e-9)
                .find_map(|q| q.forecasts.get(role).map(|g| g.demand));
            if let Some(a) = actual {
                forecast += smape(f.value, a);
                last += smape(f.demand, a);
                n += 1;
            }
        }
    }
    if n == 0 {
        return (None, None);
    }
    (Some(forecast / n as f64), Some(last / n as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(n: i32) -> BTreeMap<String, i32> {
        BTreeMap::from([("server".to_string(), n)])
    }

    #[test]
    fn provisioning_deficit_and_reaction_on_a_step_by_hand() {
        // 10 s bins, a knee of 100 tokens/s. Demand 100 for 6 minutes, then 300; one replica
        // ready until 390 s, three from then on: the step at 360 s is covered 30 s later.
        let mut demand = vec![100.0; 36];
        demand.extend(vec![300.0; 24]);
        let mut timeline = Timeline::default();
        timeline.record(0.0, &counts(1), &counts(1));
        timeline.record(390.0, &counts(3), &counts(3));
        let order = vec!["server".to_string()];
        let input = Input {
            bin: 10.0,
            duration: 600.0,
            roles: vec![RoleInput {
                role: "server",
                demand: &demand,
                knee: 100.0,
            }],
            order: &order,
            bands: &[],
        };
        let m = of(&input, &timeline, &[]);
        // Capacity 1 × 100 × 390 + 3 × 100 × 210 = 102,000; demand 36,000 + 72,000.
        assert!((m.over_provisioning.unwrap() - 102_000.0 / 108_000.0).abs() < 1e-9);
        // Short by 2 replicas for 30 s.
        assert!((m.under_provisioned_replica_seconds.unwrap() - 60.0).abs() < 1e-9);
        assert_eq!(m.deficit_minutes, Some(1));
        assert_eq!(m.reactions_seconds, vec![30.0]);
        // The minute's mean passes one replica's worth at 360 s, 30 s before the second
        // replica; two replicas' worth at 390 s, as the third is ready.
        assert_eq!(m.leads_seconds, vec![-30.0, 0.0]);
        assert_eq!(m.in_band_share, None);
    }

    #[test]
    fn a_replica_ready_before_the_ramp_leads_it() {
        // Demand rises from 50 to 150 at 300 s; a second replica is ready from 240 s.
        let mut demand = vec![50.0; 30];
        demand.extend(vec![150.0; 30]);
        let mut timeline = Timeline::default();
        timeline.record(0.0, &counts(1), &counts(1));
        timeline.record(240.0, &counts(2), &counts(2));
        let input = Input {
            bin: 10.0,
            duration: 600.0,
            roles: vec![RoleInput {
                role: "server",
                demand: &demand,
                knee: 100.0,
            }],
            order: &[],
            bands: &[],
        };
        let m = of(&input, &timeline, &[]);
        // The minute's mean passes 100 at 330 s (four bins of 150 and two of 50 average
        // 116): 90 s after the replica.
        assert_eq!(m.leads_seconds, vec![90.0]);
        assert_eq!(m.deficit_minutes, Some(0));
    }

    #[test]
    fn churn_bands_and_forecast_error_by_hand() {
        let pass = |t: f64, n: i32, forecast: Option<(f64, f64)>| PassRecord {
            t,
            replicas: counts(n),
            ready: counts(n),
            write: None,
            plan: BTreeMap::new(),
            decided: BTreeMap::new(),
            forecasts: forecast
                .map(|(demand, value)| {
                    BTreeMap::from([(
                        "server".to_string(),
                        crate::Forecast {
                            demand,
                            value,
                            horizon_seconds: 30.0,
                        },
                    )])
                })
                .unwrap_or_default(),
        };
        let passes = vec![
            pass(0.0, 1, Some((100.0, 200.0))),
            pass(15.0, 3, Some((120.0, 150.0))),
            pass(30.0, 2, Some((200.0, 200.0))),
            pass(45.0, 2, Some((150.0, 150.0))),
        ];
        assert_eq!(replica_changes(&passes), 3);
        // The 0 s forecast (200) meets the 30 s demand (200): 0; last value 100 against 200:
        // 2/3. The 15 s one (150) meets 150 at 45 s: 0; last value 120: 2 × 30 / 270.
        let (f, l) = forecast_smape(&passes);
        assert_eq!(f, Some(0.0));
        assert!((l.unwrap() - (2.0 / 3.0 + 60.0 / 270.0) / 2.0).abs() < 1e-12);
        // A 1:2 to 2:1 band held for 30 of 40 s.
        let order = vec!["p".to_string(), "d".to_string()];
        let band = Band {
            numerator: 0,
            denominator: 1,
            min: Some(0.5),
            max: Some(2.0),
        };
        let v = |p: i32, d: i32| BTreeMap::from([("p".to_string(), p), ("d".to_string(), d)]);
        let mut timeline = Timeline::default();
        timeline.record(0.0, &v(1, 1), &v(1, 1));
        timeline.record(30.0, &v(1, 3), &v(1, 3));
        assert!((timeline.in_bands(&order, &[band], 40.0) - 0.75).abs() < 1e-12);
    }
}
