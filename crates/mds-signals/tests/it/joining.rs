//! D9 amended, as invariants over random roles: a joining Pod (read without a baseline, Ready
//! since inside the window) adds what it served, so the role's rate lies between D9's letter
//! (the windowed Pods' sum, the Pods that did not answer filled in) and the old estimate (every
//! ready Pod without a window filled in with the mean); both bounds are reached.

use jiff::{SignedDuration, Timestamp};
use mds_api::target::RoleKind;
use mds_signals::EngineSample;
use mds_signals::engine::{EngineKind, read};
use mds_signals::exposition::parse;
use mds_signals::observation::{RoleInputs, observe_role};
use mds_signals::samples::SampleStore;
use proptest::prelude::*;

const VLLM: EngineKind = EngineKind::Vllm;

fn at(seconds: i64) -> Timestamp {
    "2026-11-30T10:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(seconds)
}

fn page(generated: u64) -> EngineSample {
    read(
        VLLM,
        &parse(&format!("vllm:generation_tokens_total {generated}\n")),
    )
}

/// When a joiner became Ready: inside the 15 s window, before it, or not known.
#[derive(Clone, Copy, Debug)]
enum ReadySince {
    Inside(i64),
    Before,
    Unknown,
}

fn ready_since() -> impl Strategy<Value = ReadySince> {
    prop_oneof![
        (0i64..15).prop_map(ReadySince::Inside),
        Just(ReadySince::Before),
        Just(ReadySince::Unknown),
    ]
}

proptest! {
    #[test]
    fn joiners_lie_between_the_sum_and_the_fill_in(
        windowed in prop::collection::vec(0u64..200_000, 1..6),
        joiners in prop::collection::vec((0u64..400_000, ready_since()), 0..4),
        silent in 0u32..3,
    ) {
        let mut store = SampleStore::default();
        let mut readings = Vec::new();
        for (i, served) in windowed.iter().enumerate() {
            let pod = format!("windowed-{i}");
            store.record(VLLM, &pod, None, page(1_000_000), at(0));
            readings.push(store.record(VLLM, &pod, None, page(1_000_000 + served), at(15)));
        }
        let mut joining = 0.0;
        let mut filled = 0u32;
        let mean = windowed.iter().sum::<u64>() as f64 / 15.0 / windowed.len() as f64;
        for (i, (served, since)) in joiners.iter().enumerate() {
            let mut r = store.record(VLLM, &format!("joiner-{i}"), None, page(*served), at(15));
            r.ready_since = match since {
                ReadySince::Inside(s) => Some(at(*s)),
                ReadySince::Before => Some(at(-60)),
                ReadySince::Unknown => None,
            };
            match since {
                ReadySince::Inside(_) => joining += (*served as f64 / 15.0).min(mean),
                _ => filled += 1,
            }
            readings.push(r);
        }
        let ready = (windowed.len() + joiners.len()) as u32 + silent;
        let o = observe_role(&RoleInputs {
            kind: &RoleKind::Server,
            ready_replicas: ready,
            readings: &readings,
            interval_seconds: 15,
            now: at(15),
        });
        let read = o.generation_tokens_per_second.expect("a rate");
        let sum = windowed.iter().sum::<u64>() as f64 / 15.0;
        let letter = sum + mean * f64::from(silent + filled);
        let fill_in = sum + mean * (ready as usize - windowed.len()) as f64;
        let tolerance = 1e-6 * fill_in.max(1.0);
        prop_assert!(read >= letter - tolerance, "{read} below {letter}");
        prop_assert!(read <= fill_in + tolerance, "{read} above {fill_in}");
        prop_assert!((read - (letter + joining)).abs() <= tolerance, "{read} != {}", letter + joining);
        prop_assert!(!o.coverage_complete || joiners.is_empty() && silent == 0);
    }
}
