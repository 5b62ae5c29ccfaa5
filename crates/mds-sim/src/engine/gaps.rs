//! Inter-token gaps as a latency histogram records them: every gap an engine observed, per
//! minute of its clock, counted in buckets 0.8 to 1.6 % wide (what a scraper of vLLM's
//! inter-token histogram sees, one observation per output step, at a resolution fine enough
//! to read a p95), and exactly how many were over the ITL objective.

use std::collections::BTreeMap;

/// A bucket is a float's exponent and its mantissa's top bits: 64 buckets an octave.
const SHIFT: u32 = 52 - 6;

/// Gaps per minute of the engine clock, in buckets of the float's exponent and top six
/// mantissa bits (64 an octave, so 0.8 to 1.6 % wide; one shift to find, where a logarithm
/// costs the engine's hot loop a tenth of its time). Minutes ascending, each minute's buckets ascending
/// (an engine observes in time order, so a new gap almost always lands in the last minute).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct GapLog {
    minutes: Vec<(u32, Minute)>,
}

/// One minute's gaps.
#[derive(Clone, Debug, PartialEq, Default)]
struct Minute {
    /// Gaps over the objective they were observed against.
    over: u64,
    buckets: Vec<(i32, u64)>,
}

/// The bucket of a positive finite gap.
fn bucket(gap: f64) -> i32 {
    (gap.to_bits() >> SHIFT) as i32
}

/// The smallest float above every gap of `bucket`.
fn upper_edge(bucket: i32) -> f64 {
    f64::from_bits(((bucket as u64) + 1) << SHIFT)
}

/// Adds `count` to `bucket` in a minute's ascending buckets.
fn add(buckets: &mut Vec<(i32, u64)>, bucket: i32, count: u64) {
    match buckets.binary_search_by_key(&bucket, |b| b.0) {
        Ok(i) => buckets[i].1 += count,
        Err(i) => buckets.insert(i, (bucket, count)),
    }
}

impl GapLog {
    /// `count` gaps of `gap` seconds, observed at `at` seconds on the engine clock, `over`
    /// the ITL objective or not.
    pub fn observe(&mut self, at: f64, gap: f64, count: u64, over: bool) {
        if count == 0 || !(gap.is_finite() && gap > 0.0) {
            return;
        }
        let minute = self.minute_mut((at.max(0.0) / 60.0) as u32);
        add(&mut minute.buckets, bucket(gap), count);
        if over {
            minute.over += count;
        }
    }

    fn minute_mut(&mut self, minute: u32) -> &mut Minute {
        let i = match self.minutes.last() {
            Some((m, _)) if *m == minute => self.minutes.len() - 1,
            _ => match self.minutes.binary_search_by_key(&minute, |m| m.0) {
                Ok(i) => i,
                Err(i) => {
                    self.minutes.insert(i, (minute, Minute::default()));
                    i
                }
            },
        };
        &mut self.minutes[i].1
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: GapLog) {
        for (minute, m) in other.minutes {
            let into = self.minute_mut(minute);
            if into.buckets.is_empty() {
                *into = m;
                continue;
            }
            into.over += m.over;
            for (b, n) in m.buckets {
                add(&mut into.buckets, b, n);
            }
        }
    }

    /// Everything observed so far, leaving this log empty.
    pub fn take(&mut self) -> GapLog {
        std::mem::take(self)
    }

    pub fn is_empty(&self) -> bool {
        self.minutes.is_empty()
    }

    /// Minutes with gaps.
    pub fn minutes(&self) -> impl Iterator<Item = u32> + '_ {
        self.minutes.iter().map(|m| m.0)
    }

    /// The minute's gaps: how many, and how many over the objective.
    pub fn over(&self, minute: u32) -> (u64, u64) {
        self.minutes
            .binary_search_by_key(&minute, |m| m.0)
            .ok()
            .map_or((0, 0), |i| {
                let m = &self.minutes[i].1;
                (m.buckets.iter().map(|b| b.1).sum(), m.over)
            })
    }

    /// The `q` quantile (nearest rank) of every gap in `minutes` (all of them for `None`), as
    /// its bucket's upper edge: at most 1.6 % above the true value.
    pub fn quantile(&self, minutes: Option<std::ops::Range<u32>>, q: f64) -> Option<f64> {
        let mut merged: BTreeMap<i32, u64> = BTreeMap::new();
        for (minute, m) in &self.minutes {
            if minutes.as_ref().is_some_and(|r| !r.contains(minute)) {
                continue;
            }
            for &(b, n) in &m.buckets {
                *merged.entry(b).or_default() += n;
            }
        }
        let total: u64 = merged.values().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (b, n) in merged {
            seen += n;
            if seen >= rank {
                return Some(upper_edge(b));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_reads_a_minutes_p95_within_two_percent_and_counts_gaps_over_exactly() {
        let mut log = GapLog::default();
        // Minute 0: 94 gaps of 12 ms, 6 of 80 ms (over a 50 ms objective); minute 1: 100 of 20 ms.
        log.observe(10.0, 0.012, 94, false);
        log.observe(50.0, 0.080, 6, true);
        log.observe(70.0, 0.020, 100, false);
        let q = log.quantile(Some(0..1), 0.95).unwrap();
        assert!((0.080..=0.080 * 1.016).contains(&q), "{q}");
        let q = log.quantile(Some(0..1), 0.90).unwrap();
        assert!((0.012..=0.012 * 1.016).contains(&q), "{q}");
        assert_eq!(log.over(0), (100, 6));
        assert_eq!(log.over(1), (100, 0));
        assert_eq!(log.over(2), (0, 0));
        let mut other = GapLog::default();
        other.observe(65.0, 0.020, 1, false);
        other.observe(130.0, 0.3, 2, true);
        log.merge(other);
        assert_eq!(log.over(1), (101, 0));
        assert_eq!(log.over(2), (2, 2));
        assert_eq!(log.minutes().collect::<Vec<_>>(), vec![0, 1, 2]);
        let all = log.quantile(None, 0.5).unwrap();
        assert!((0.012..=0.0204).contains(&all), "{all}");
        // Nothing, and nonsense, is not observed.
        log.observe(0.0, f64::NAN, 3, true);
        log.observe(0.0, 0.01, 0, true);
        assert_eq!(log.over(0), (100, 6));
    }
}
