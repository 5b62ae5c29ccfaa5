//! The load's mix over time: the trace's ten-minute windows grouped by their mean prompt and
//! output, so the oracles read each window's attainment on curves measured on its own mix. A
//! knee in tokens per second measured on the whole load's mix is not the knee of a window
//! whose prompts are ten times longer or whose outputs ten times shorter: on a trace of chat
//! by day and 4-16k-token prompts by night, curves of the whole mix made the night's minimum
//! of two replicas look short and Oracle A came out above what every policy paid.
//!
//! Windows are keyed by their mean prompt and mean output on a log grid a
//! factor [`SIMILAR`] wide; keys are merged, closest first (the larger of the two log
//! ratios), while they are within that factor of each other or while there are more than
//! [`MAX_GROUPS`]. A window with fewer than [`THIN`] requests joins the group of the nearest
//! window in time that has enough. Deterministic: ties go to the earlier group.
//!
//! A trace with prefixes (Mooncake's block hashes) stays one group: what a replica's prefix
//! cache serves in a window depends on the windows before it, so a group's requests offered
//! alone to a cold replica would read a worse curve than the run can see.

use mds_sim::load::Trace;

/// Width of a mix window, seconds (a rate curve's windows are ten minutes too).
pub const WINDOW_SECONDS: f64 = 600.0;
/// The most groups a load is split into (each costs one more set of curves).
pub const MAX_GROUPS: usize = 4;
/// Windows whose mean prompt and mean output are both within this factor share a group.
pub const SIMILAR: f64 = 1.5;
/// Windows with fewer requests than this have no mix of their own.
pub const THIN: usize = 30;

/// The windows of a load and the group of each.
#[derive(Clone, Debug, PartialEq)]
pub struct MixGroups {
    /// Group of each window, in time order.
    pub window_group: Vec<usize>,
    /// The trace's request indices in each group, ascending.
    pub members: Vec<Vec<usize>>,
    /// Each group's mean prompt and mean output tokens per request.
    pub means: Vec<(f64, f64)>,
}

/// A window's or a group's requests and token sums.
#[derive(Clone, Copy, Debug, Default)]
struct Sums {
    requests: usize,
    prompt: f64,
    output: f64,
}

impl Sums {
    fn add(&mut self, other: Sums) {
        self.requests += other.requests;
        self.prompt += other.prompt;
        self.output += other.output;
    }

    /// Mean prompt and output tokens, each at least one.
    fn means(&self) -> (f64, f64) {
        let n = self.requests.max(1) as f64;
        ((self.prompt / n).max(1.0), (self.output / n).max(1.0))
    }

    /// The larger log ratio of the two means: how far apart two mixes are.
    fn distance(&self, other: &Sums) -> f64 {
        let ((p, o), (q, r)) = (self.means(), other.means());
        (p / q).ln().abs().max((o / r).ln().abs())
    }
}

impl MixGroups {
    /// The groups of `trace` over `duration` seconds.
    pub fn of(trace: &Trace, duration: f64) -> MixGroups {
        let windows = ((duration / WINDOW_SECONDS).ceil() as usize).max(1);
        let mut sums = vec![Sums::default(); windows];
        let window_of = |at: f64| ((at.max(0.0) / WINDOW_SECONDS) as usize).min(windows - 1);
        for r in &trace.requests {
            let s = &mut sums[window_of(r.at_seconds)];
            s.requests += 1;
            // The whole prompt: how much of it a prefix cache serves depends on what the
            // cache has seen, not on the mix.
            s.prompt += f64::from(r.prompt_tokens);
            s.output += f64::from(r.output_tokens);
        }
        let prefixes = trace.requests.iter().any(|r| r.block_hashes.is_some());
        // Clusters of windows with the same key on the log grid, in order of first window.
        let step = SIMILAR.ln();
        let key = |s: &Sums| {
            let (p, o) = s.means();
            (
                (p.ln() / step).round() as i64,
                (o.ln() / step).round() as i64,
            )
        };
        let mut clusters: Vec<(Sums, Vec<usize>)> = Vec::new();
        let mut keys: Vec<(i64, i64)> = Vec::new();
        let own_mix = |s: &Sums| !prefixes && s.requests >= THIN;
        for (w, s) in sums.iter().enumerate().filter(|(_, s)| own_mix(s)) {
            match keys.iter().position(|k| *k == key(s)) {
                Some(i) => {
                    clusters[i].0.add(*s);
                    clusters[i].1.push(w);
                }
                None => {
                    keys.push(key(s));
                    clusters.push((*s, vec![w]));
                }
            }
        }
        // Merge the closest pair while it is within the factor or there are too many.
        while clusters.len() > 1 {
            let mut closest = (f64::INFINITY, 0, 1);
            for i in 0..clusters.len() {
                for j in i + 1..clusters.len() {
                    let d = clusters[i].0.distance(&clusters[j].0);
                    if d < closest.0 {
                        closest = (d, i, j);
                    }
                }
            }
            let (d, i, j) = closest;
            if d > step + 1e-12 && clusters.len() <= MAX_GROUPS {
                break;
            }
            let (s, mut w) = clusters.remove(j);
            clusters[i].0.add(s);
            clusters[i].1.append(&mut w);
        }
        let mut window_group = vec![usize::MAX; windows];
        for (g, (_, ws)) in clusters.iter().enumerate() {
            for &w in ws {
                window_group[w] = g;
            }
        }
        if clusters.is_empty() {
            window_group.fill(0);
        }
        // Thin windows take the group of the nearest window that has one, earlier first.
        let grouped: Vec<usize> = (0..windows)
            .filter(|&w| window_group[w] != usize::MAX)
            .collect();
        for w in 0..windows {
            if window_group[w] == usize::MAX {
                let nearest = grouped.iter().min_by_key(|&&g| (g.abs_diff(w), g)).copied();
                window_group[w] = nearest.map_or(0, |g| window_group[g]);
            }
        }
        let groups = clusters.len().max(1);
        let mut members = vec![Vec::new(); groups];
        let mut totals = vec![Sums::default(); groups];
        for (i, r) in trace.requests.iter().enumerate() {
            let g = window_group[window_of(r.at_seconds)];
            members[g].push(i);
        }
        for (w, s) in sums.iter().enumerate() {
            totals[window_group[w]].add(*s);
        }
        MixGroups {
            window_group,
            members,
            means: totals.iter().map(Sums::means).collect(),
        }
    }

    /// `mix` as one group: every request together.
    pub fn single(mix: &MixGroups) -> MixGroups {
        let mut members: Vec<usize> = mix.members.iter().flatten().copied().collect();
        members.sort_unstable();
        let n: f64 = mix
            .members
            .iter()
            .map(|m| m.len() as f64)
            .sum::<f64>()
            .max(1.0);
        let mean = |f: fn(&(f64, f64)) -> f64| {
            mix.means
                .iter()
                .zip(&mix.members)
                .map(|(m, ids)| f(m) * ids.len() as f64)
                .sum::<f64>()
                / n
        };
        MixGroups {
            window_group: vec![0; mix.window_group.len()],
            means: vec![(mean(|m| m.0), mean(|m| m.1))],
            members: vec![members],
        }
    }

    /// One group: the whole load's mix.
    pub fn is_single(&self) -> bool {
        self.members.len() <= 1
    }

    /// The group of the window holding `seconds`.
    pub fn group_at(&self, seconds: f64) -> usize {
        let w = (seconds.max(0.0) / WINDOW_SECONDS) as usize;
        self.window_group
            .get(w.min(self.window_group.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mds_sim::load::TraceRequest;

    /// `n` requests a second apart from `from` seconds, each of `prompt` and `output` tokens.
    fn requests(from: f64, n: usize, prompt: u32, output: u32) -> Vec<TraceRequest> {
        (0..n)
            .map(|i| TraceRequest::plain(from + i as f64, prompt, output))
            .collect()
    }

    fn trace(parts: &[(f64, usize, u32, u32)]) -> Trace {
        Trace {
            requests: parts
                .iter()
                .flat_map(|&(from, n, p, o)| requests(from, n, p, o))
                .collect(),
        }
    }

    #[test]
    fn a_steady_mix_is_one_group() {
        let t = trace(&[(0.0, 1800, 1000, 200)]);
        let g = MixGroups::of(&t, 1800.0);
        assert!(g.is_single());
        assert_eq!(g.window_group, vec![0, 0, 0]);
        assert_eq!(g.members[0].len(), 1800);
    }

    #[test]
    fn chat_by_day_and_long_prompts_by_night_are_two_groups_and_a_return_joins_its_own() {
        // Day (1k prompts), night (10k prompts), day again; a thin window in the night.
        let t = trace(&[
            (0.0, 1200, 1000, 200),
            (1200.0, 500, 10_000, 100),
            (1800.0, 5, 10_000, 100),
            (2400.0, 600, 1100, 210),
        ]);
        let g = MixGroups::of(&t, 3000.0);
        assert_eq!(g.window_group, vec![0, 0, 1, 1, 0]);
        assert_eq!(g.members.len(), 2);
        assert_eq!(g.members[1].len(), 505);
        let (p, o) = g.means[1];
        assert!((p - 10_000.0).abs() < 1e-9 && (o - 100.0).abs() < 1e-9);
        assert_eq!(g.group_at(1500.0), 1);
        assert_eq!(g.group_at(1e9), 0, "past the end: the last window's group");
    }

    #[test]
    fn outputs_that_swing_tenfold_split_and_the_groups_are_capped() {
        // Eight windows whose outputs double each time: at most MAX_GROUPS groups.
        let parts: Vec<(f64, usize, u32, u32)> = (0..8)
            .map(|w| (600.0 * w as f64, 300, 800, 10 << w))
            .collect();
        let g = MixGroups::of(&trace(&parts), 4800.0);
        assert_eq!(g.members.len(), MAX_GROUPS);
        // Neighbours in mix stay together: each group's windows are consecutive here.
        for group in 0..g.members.len() {
            let ws: Vec<usize> = (0..8).filter(|&w| g.window_group[w] == group).collect();
            assert!(
                ws.windows(2).all(|p| p[1] == p[0] + 1),
                "{:?}",
                g.window_group
            );
        }
        let total: usize = g.members.iter().map(Vec::len).sum();
        assert_eq!(total, 2400, "every request is in one group");
    }

    #[test]
    fn a_trace_with_prefixes_is_one_group() {
        let mut t = trace(&[(0.0, 600, 1000, 200), (600.0, 600, 10_000, 20)]);
        for r in &mut t.requests {
            r.block_hashes = Some(std::sync::Arc::from(vec![1_u64, 2]));
        }
        let g = MixGroups::of(&t, 1200.0);
        assert!(g.is_single());
        assert_eq!(g.members[0].len(), 1200);
        assert!((g.means[0].0 - 5500.0).abs() < 1e-9);
    }

    #[test]
    fn an_empty_or_thin_load_is_one_group() {
        let g = MixGroups::of(&Trace { requests: vec![] }, 600.0);
        assert!(g.is_single());
        let g = MixGroups::of(&trace(&[(0.0, 5, 100, 10), (700.0, 5, 9000, 900)]), 1200.0);
        assert!(g.is_single());
        assert_eq!(g.members[0].len(), 10);
    }
}
