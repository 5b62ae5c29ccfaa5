//! Synthetic loads and trace transforms: request counts follow the integral of the rate, the
//! shapes' features land where the spec puts them, everything repeats for a seed, and every
//! spec error names its key.
//!
//! Counts are Poisson (or binomial), so tolerances are stated in standard deviations of the
//! expected count; the seeds are fixed, so the tests are deterministic either way.

use std::sync::Arc;

use mds_sim::load::TraceRequest;
use mds_sim::load::synthetic::{DEFAULT_DURATION_SECONDS, SHAPE_NAMES};
use mds_sim::{Shape, Synthetic, Trace};
use proptest::prelude::*;

const SEED: u64 = 20_260_101;

fn load(spec: &str) -> Synthetic {
    Synthetic::parse(spec).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn count(trace: &Trace, from: f64, until: f64) -> usize {
    trace
        .requests
        .iter()
        .filter(|r| from <= r.at_seconds && r.at_seconds < until)
        .count()
}

/// Asserts a Poisson count within four standard deviations of its mean.
fn poisson(what: &str, observed: usize, expected: f64) {
    let tolerance = 4.0 * expected.sqrt().max(1.0);
    assert!(
        (observed as f64 - expected).abs() <= tolerance,
        "{what}: {observed} requests, expected {expected:.1} ± {tolerance:.1}"
    );
}

fn assert_sorted_within(trace: &Trace, duration: f64) {
    for pair in trace.requests.windows(2) {
        assert!(pair[0].at_seconds <= pair[1].at_seconds, "unsorted");
    }
    for r in &trace.requests {
        assert!(
            (0.0..duration).contains(&r.at_seconds),
            "{} s",
            r.at_seconds
        );
    }
}

// ---- synthetic shapes -------------------------------------------------------------------

#[test]
fn a_constant_rate_gives_rate_times_duration() {
    let trace = load("constant:rate=4").generate(SEED);
    poisson("constant", trace.requests.len(), 4.0 * 3600.0);
    assert_sorted_within(&trace, 3600.0);
    // Each quarter-hour on its own, too.
    for q in 0..4 {
        let from = q as f64 * 900.0;
        poisson("quarter", count(&trace, from, from + 900.0), 3600.0);
    }
}

#[test]
fn a_step_changes_the_count_at_its_time() {
    let trace = load("step:from=2,to=8,at=600").generate(SEED);
    poisson("before", count(&trace, 0.0, 600.0), 2.0 * 600.0);
    poisson("after", count(&trace, 600.0, 3600.0), 8.0 * 3000.0);
    // The step is sharp: the minute either side of it.
    poisson("minute before", count(&trace, 540.0, 600.0), 120.0);
    poisson("minute after", count(&trace, 600.0, 660.0), 480.0);
}

#[test]
fn a_ramp_integrates_to_its_trapezoid() {
    let trace = load("ramp:from=1,to=10,start=300,over=1200").generate(SEED);
    poisson("before", count(&trace, 0.0, 300.0), 300.0);
    poisson(
        "ramp",
        count(&trace, 300.0, 1500.0),
        (1.0 + 10.0) / 2.0 * 1200.0,
    );
    poisson("after", count(&trace, 1500.0, 3600.0), 10.0 * 2100.0);
    // The ramp's first and last minutes: rates about 1.2 and 9.8.
    poisson("ramp start", count(&trace, 300.0, 360.0), 60.0 * 1.225);
    poisson("ramp end", count(&trace, 1440.0, 1500.0), 60.0 * 9.775);
}

#[test]
fn a_sinusoid_averages_to_its_mean_and_peaks_a_quarter_period_in() {
    let trace = load("sinusoid:mean=4,amplitude=3,period=1800").generate(SEED);
    poisson("two periods", trace.requests.len(), 4.0 * 3600.0);
    // ∫ (4 + 3 sin(2πt/1800)) over the first and second half-period.
    let half = 4.0 * 900.0 + 3.0 * 1800.0 / std::f64::consts::PI;
    poisson("rising half", count(&trace, 0.0, 900.0), half);
    poisson(
        "falling half",
        count(&trace, 900.0, 1800.0),
        4.0 * 1800.0 - half,
    );
}

#[test]
fn a_sinusoid_deeper_than_its_mean_is_clamped_at_zero() {
    // mean 1, amplitude 3: the rate is 0 wherever sin < -1/3.
    let trace = load("sinusoid:mean=1,amplitude=3,period=1000,duration=1000").generate(SEED);
    let trough = count(&trace, 640.0, 860.0); // sin(2πt/1000) < -0.77 throughout
    assert_eq!(trough, 0, "no requests where the rate is clamped");
}

#[test]
fn a_flash_crowd_reaches_its_peak_minute_and_returns_to_base() {
    let spec = "flash-crowd:base=2,peak=20,at=900,rise=30,hold=300,decay=120";
    let trace = load(spec).generate(SEED);
    // The minute after the rise is at the peak.
    poisson("peak minute", count(&trace, 930.0, 990.0), 20.0 * 60.0);
    poisson("before", count(&trace, 0.0, 900.0), 2.0 * 900.0);
    poisson("rise", count(&trace, 900.0, 930.0), 11.0 * 30.0);
    poisson("hold", count(&trace, 930.0, 1230.0), 20.0 * 300.0);
    poisson("decay", count(&trace, 1230.0, 1350.0), 11.0 * 120.0);
    poisson("after", count(&trace, 1350.0, 3600.0), 2.0 * 2250.0);
    // The busiest minute anywhere is about peak × 60.
    let busiest = (0..3540)
        .step_by(10)
        .map(|s| count(&trace, s as f64, s as f64 + 60.0))
        .max()
        .unwrap();
    poisson("busiest minute", busiest, 20.0 * 60.0);
}

#[test]
fn on_off_has_no_requests_while_off() {
    let trace = load("on-off:rate=6,on=300,off=600").generate(SEED);
    for cycle in 0..4 {
        let start = cycle as f64 * 900.0;
        poisson("on", count(&trace, start, start + 300.0), 6.0 * 300.0);
        assert_eq!(
            count(&trace, start + 300.0, start + 900.0),
            0,
            "cycle {cycle} off"
        );
    }
}

#[test]
fn generation_repeats_for_a_seed_and_differs_across_seeds() {
    for spec in [
        "constant:rate=2,duration=10m",
        "flash-crowd:base=1,peak=5,at=60,rise=10,hold=60,decay=30,duration=5m",
    ] {
        let load = load(spec);
        assert_eq!(load.generate(7), load.generate(7), "{spec}");
        assert_ne!(load.generate(7), load.generate(8), "{spec}");
    }
}

#[test]
fn lengths_spread_around_their_means_and_carry_no_prefix() {
    let trace = load("constant:rate=10,prompt=1000,output=200").generate(SEED);
    let n = trace.requests.len() as f64;
    let mean = |f: fn(&TraceRequest) -> u32| {
        trace.requests.iter().map(|r| f64::from(f(r))).sum::<f64>() / n
    };
    assert!((mean(|r| r.prompt_tokens) - 1000.0).abs() < 5.0);
    assert!((mean(|r| r.output_tokens) - 200.0).abs() < 1.0);
    for r in &trace.requests {
        assert!(
            (500..=1500).contains(&r.prompt_tokens),
            "{}",
            r.prompt_tokens
        );
        assert!(
            (100..=300).contains(&r.output_tokens),
            "{}",
            r.output_tokens
        );
        assert_eq!(r.prefix_hit_tokens, 0);
        assert!(r.block_hashes.is_none());
    }
    let tiny = load("constant:rate=10,prompt=1,output=1,duration=60").generate(SEED);
    assert!(
        tiny.requests
            .iter()
            .all(|r| r.prompt_tokens == 1 && r.output_tokens == 1)
    );
}

#[test]
fn a_zero_rate_gives_an_empty_trace() {
    assert!(load("constant:rate=0").generate(SEED).requests.is_empty());
    assert!(
        load("on-off:rate=0,on=1,off=1")
            .generate(SEED)
            .requests
            .is_empty()
    );
}

// ---- parsing ----------------------------------------------------------------------------

#[test]
fn the_documented_specs_parse_to_their_shapes() {
    let cases = [
        ("constant:rate=4", Shape::Constant { rate: 4.0 }),
        (
            "step:from=2,to=8,at=600",
            Shape::Step {
                from: 2.0,
                to: 8.0,
                at: 600.0,
            },
        ),
        (
            "ramp:from=1,to=10,start=300,over=1200",
            Shape::Ramp {
                from: 1.0,
                to: 10.0,
                start: 300.0,
                duration: 1200.0,
            },
        ),
        (
            "sinusoid:mean=4,amplitude=3,period=1800",
            Shape::Sinusoid {
                mean: 4.0,
                amplitude: 3.0,
                period: 1800.0,
            },
        ),
        (
            "flash-crowd:base=2,peak=20,at=900,rise=30,hold=300,decay=120",
            Shape::FlashCrowd {
                base: 2.0,
                peak: 20.0,
                at: 900.0,
                rise: 30.0,
                hold: 300.0,
                decay: 120.0,
            },
        ),
        (
            "on-off:rate=6,on=300,off=600",
            Shape::OnOff {
                rate: 6.0,
                on: 300.0,
                off: 600.0,
            },
        ),
    ];
    for (spec, shape) in cases {
        let load = load(spec);
        assert_eq!(load.shape, shape, "{spec}");
        assert_eq!(load.duration_seconds, DEFAULT_DURATION_SECONDS, "{spec}");
        assert_eq!(
            (load.prompt_tokens, load.output_tokens),
            (1024, 256),
            "{spec}"
        );
        assert_eq!(Synthetic::parse(&load.spec()).unwrap(), load, "{spec}");
        assert!(!load.describe().contains('\n'), "{spec}");
    }
}

#[test]
fn times_take_suffixes_and_common_keys_override_the_defaults() {
    let l = load(" step: from=2 , to=8, at=10m, duration=1.5h, prompt=512, output=64 ");
    assert_eq!(
        l.shape,
        Shape::Step {
            from: 2.0,
            to: 8.0,
            at: 600.0
        }
    );
    assert_eq!(l.duration_seconds, 5400.0);
    assert_eq!((l.prompt_tokens, l.output_tokens), (512, 64));
    assert_eq!(load("constant:rate=1,duration=90s").duration_seconds, 90.0);
    assert_eq!(load("constant:rate=1,length=2m").duration_seconds, 120.0);
    // A ramp's `duration` is the ramp's; `length` is the trace's.
    let ramp = load("ramp:from=1,to=2,start=0,over=5m,duration=1h");
    assert_eq!(ramp.duration_seconds, 3600.0);
    assert!(matches!(ramp.shape, Shape::Ramp { duration, .. } if duration == 300.0));
    assert!(
        load("constant:rate=4")
            .describe()
            .starts_with("constant 4 req/s for 3600 s"),
        "{}",
        load("constant:rate=4").describe()
    );
}

/// Asserts that `spec` is rejected with an error containing every one of `words`.
fn rejected(spec: &str, words: &[&str]) {
    let err = Synthetic::parse(spec).expect_err(spec);
    for word in words {
        assert!(
            err.contains(word),
            "{spec}: {err:?} does not mention {word:?}"
        );
    }
}

#[test]
fn every_parse_error_names_the_shape_or_key_and_the_rule() {
    // Unknown shapes list the known ones.
    let mut known = vec!["unknown load shape", "\"burst\""];
    known.extend(SHAPE_NAMES);
    rejected("burst:rate=4", &known);
    rejected("", &["unknown load shape", "flash-crowd"]);
    rejected("Constant:rate=4", &["\"Constant\"", "constant"]);
    // Unknown keys list the allowed ones.
    rejected(
        "step:from=1,to=2,at=3,rate=4",
        &[
            "unknown key \"rate\"",
            "from, to, at, duration, length, prompt, output",
        ],
    );
    rejected("ramp:from=1,to=2,start=0,over=1,over=2", &["over", "twice"]);
    // A ramp's own length is `over`; `duration` is the whole load's, as for every shape.
    rejected(
        "ramp:from=1,to=2,start=0,duration=1200",
        &["missing required key over (the ramp's own length; duration is the whole load's)"],
    );
    rejected("constant:rate", &["\"rate\"", "key=value"]);
    rejected("constant:rate=", &["rate", "no value"]);
    rejected("constant:rate=4,rate=5", &["rate", "twice"]);
    // Missing required keys.
    rejected("constant", &["missing required key rate"]);
    rejected(
        "flash-crowd:base=2,peak=20,at=900,rise=30,hold=300",
        &[
            "missing required key decay",
            "base, peak, at, rise, hold, decay",
        ],
    );
    rejected("on-off:rate=1,off=3", &["missing required key on"]);
    // Numbers.
    rejected("constant:rate=-1", &["rate", "negative"]);
    rejected("step:from=1,to=2,at=-5m", &["at", "negative"]);
    rejected("constant:rate=inf", &["rate", "finite"]);
    rejected("constant:rate=NaN", &["rate", "finite"]);
    rejected("step:from=1,to=2,at=1e400", &["at", "finite"]);
    rejected("constant:rate=four", &["rate", "requests per second"]);
    rejected("constant:rate=4m", &["rate", "requests per second"]);
    rejected("step:from=1,to=2,at=10d", &["at", "suffix ms, s, m or h"]);
    // Rules between values.
    rejected("constant:rate=1,duration=0", &["duration", "positive"]);
    rejected(
        "ramp:from=1,to=2,start=0,over=9,duration=0",
        &["duration", "positive"],
    );
    rejected(
        "constant:rate=1,duration=1,length=1",
        &["duration and length", "give one"],
    );
    rejected(
        "flash-crowd:base=20,peak=2,at=900,rise=30,hold=300,decay=120",
        &["flash-crowd", "peak (2) must be at least base (20)"],
    );
    rejected(
        "sinusoid:mean=4,amplitude=3,period=0",
        &["period", "positive"],
    );
    rejected("on-off:rate=1,on=0,off=3", &["on", "positive"]);
    rejected("constant:rate=4,prompt=0", &["prompt", "whole number"]);
    rejected("constant:rate=4,output=2.5", &["output", "whole number"]);
    rejected("constant:rate=4,prompt=-3", &["prompt", "whole number"]);
    rejected(
        "constant:rate=1e9,duration=1h",
        &["constant", "at most", "requests"],
    );
}

#[test]
fn validate_guards_loads_built_in_code() {
    let bad = Synthetic {
        shape: Shape::Constant { rate: f64::NAN },
        duration_seconds: 60.0,
        prompt_tokens: 10,
        output_tokens: 10,
    };
    assert!(bad.validate().unwrap_err().contains("rate"));
    assert!(bad.generate(SEED).requests.is_empty());
    let ramp = Synthetic {
        shape: Shape::Ramp {
            from: 1.0,
            to: 2.0,
            start: 0.0,
            duration: 1.0,
        },
        duration_seconds: -1.0,
        prompt_tokens: 10,
        output_tokens: 10,
    };
    assert!(ramp.validate().unwrap_err().contains("duration"));
}

// ---- trace transforms -------------------------------------------------------------------

/// 1,000 requests about a second apart over about 1,000 s, with block hashes on every other.
fn recorded() -> Trace {
    let mut jitter = mds_sim::rng::Rng::new(99);
    let mut at = 0.0;
    let requests = (0..1000u32)
        .map(|i| {
            let r = TraceRequest {
                at_seconds: at,
                prompt_tokens: 100 + i,
                output_tokens: 10 + i % 7,
                prefix_hit_tokens: i % 3,
                block_hashes: (i % 2 == 0).then(|| Arc::from(vec![u64::from(i), 1, 2])),
            };
            at += jitter.uniform(0.2, 1.8);
            r
        })
        .collect();
    Trace { requests }
}

fn assert_sorted(trace: &Trace) {
    for pair in trace.requests.windows(2) {
        assert!(pair[0].at_seconds <= pair[1].at_seconds, "unsorted");
    }
}

#[test]
fn a_window_keeps_its_requests_and_rebases_them() {
    let trace = recorded();
    let window = trace.window(100.0, Some(200.0)).unwrap();
    assert_eq!(window.requests.len(), count(&trace, 100.0, 200.0));
    assert!(
        window
            .requests
            .iter()
            .all(|r| (0.0..100.0).contains(&r.at_seconds))
    );
    let first = trace
        .requests
        .iter()
        .find(|r| r.at_seconds >= 100.0)
        .unwrap();
    assert_eq!(window.requests[0].at_seconds, first.at_seconds - 100.0);
    assert_eq!(window.requests[0].prompt_tokens, first.prompt_tokens);
    let rest = trace.window(500.0, None).unwrap();
    assert_eq!(rest.requests.len(), count(&trace, 500.0, f64::INFINITY));
    assert_eq!(trace.window(0.0, None).unwrap(), trace);
    assert!(trace.window(5000.0, None).unwrap().requests.is_empty());

    for (from, until) in [(-1.0, None), (f64::NAN, None), (f64::INFINITY, None)] {
        let err = trace.window(from, until).unwrap_err();
        assert!(
            err.contains("--from") && err.contains("at least 0"),
            "{err}"
        );
    }
    for until in [100.0, 50.0, f64::NAN] {
        let err = trace.window(100.0, Some(until)).unwrap_err();
        assert!(
            err.contains("--until") && err.contains("later than --from"),
            "{err}"
        );
    }
}

#[test]
fn time_scaling_stretches_the_axis_and_keeps_the_requests() {
    let trace = recorded();
    let fast = trace.time_scaled(0.5).unwrap();
    assert_eq!(fast.requests.len(), trace.requests.len());
    assert!((fast.duration_seconds() - trace.duration_seconds() / 2.0).abs() < 1e-9);
    for (a, b) in fast.requests.iter().zip(&trace.requests) {
        assert_eq!(a.at_seconds, b.at_seconds * 0.5);
        assert_eq!(
            (a.prompt_tokens, &a.block_hashes),
            (b.prompt_tokens, &b.block_hashes)
        );
    }
    assert_sorted(&fast);
    for bad in [0.0, -2.0, f64::NAN, f64::INFINITY] {
        let err = trace.time_scaled(bad).unwrap_err();
        assert!(err.contains("positive, finite"), "{err}");
    }
}

#[test]
fn rate_multiplying_changes_the_count_and_keeps_the_duration() {
    let trace = recorded();
    let span = trace.duration_seconds();
    let mean_gap = span / 999.0;

    let triple = trace.rate_multiplied(3.0, SEED).unwrap();
    assert_eq!(triple.requests.len(), 3000, "every request and two copies");
    assert_sorted(&triple);
    assert!(triple.duration_seconds() >= span);
    assert!(
        triple.duration_seconds() < span + mean_gap,
        "within one mean gap"
    );
    // Copies keep tokens and block hashes: every original appears three times.
    for original in &trace.requests {
        let copies: Vec<_> = triple
            .requests
            .iter()
            .filter(|r| r.prompt_tokens == original.prompt_tokens)
            .collect();
        assert_eq!(copies.len(), 3);
        assert!(
            copies
                .iter()
                .all(|c| c.block_hashes == original.block_hashes
                    && c.output_tokens == original.output_tokens
                    && c.prefix_hit_tokens == original.prefix_hit_tokens
                    && c.at_seconds >= original.at_seconds)
        );
        assert_eq!(
            copies[0].at_seconds, original.at_seconds,
            "the original first"
        );
    }

    // A quarter: binomial(1000, 0.25), σ ≈ 13.7; within 4σ.
    let quarter = trace.rate_multiplied(0.25, SEED).unwrap();
    let n = quarter.requests.len() as f64;
    assert!((n - 250.0).abs() <= 55.0, "{n}");
    assert!(
        quarter.duration_seconds() > 0.97 * span,
        "{}",
        quarter.duration_seconds()
    );
    assert_sorted(&quarter);

    // 2.5: every request, one copy, and a second with probability ½: about 2,500.
    let two_and_a_half = trace.rate_multiplied(2.5, SEED).unwrap();
    let n = two_and_a_half.requests.len() as f64;
    assert!((n - 2500.0).abs() <= 64.0, "{n}");
    assert_sorted(&two_and_a_half);

    assert_eq!(trace.rate_multiplied(1.0, SEED).unwrap(), trace);
    assert_eq!(
        triple,
        trace.rate_multiplied(3.0, SEED).unwrap(),
        "same seed"
    );
    assert_eq!(
        quarter,
        trace.rate_multiplied(0.25, SEED).unwrap(),
        "same seed"
    );
    assert_ne!(triple, trace.rate_multiplied(3.0, SEED + 1).unwrap());
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let err = trace.rate_multiplied(bad, SEED).unwrap_err();
        assert!(err.contains("positive, finite"), "{err}");
    }
    let err = trace.rate_multiplied(1e9, SEED).unwrap_err();
    assert!(err.contains("at most"), "{err}");
}

// ---- properties -------------------------------------------------------------------------

fn spec_like() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        proptest::sample::select(SHAPE_NAMES.to_vec()).prop_map(String::from),
        "[a-z-]{0,12}",
    ];
    let key = prop_oneof![
        proptest::sample::select(vec![
            "rate",
            "from",
            "to",
            "at",
            "start",
            "duration",
            "length",
            "mean",
            "amplitude",
            "period",
            "base",
            "peak",
            "rise",
            "hold",
            "decay",
            "on",
            "off",
            "prompt",
            "output",
        ])
        .prop_map(String::from),
        "[a-z]{0,6}",
    ];
    let value = prop_oneof![
        (0.0..50.0f64).prop_map(|v| format!("{v}")),
        (0u32..5000).prop_map(|v| v.to_string()),
        "-?[0-9.e+]{0,8}[smhd]?",
        Just("inf".to_string()),
        Just("NaN".to_string()),
        ".{0,6}",
    ];
    let item = prop_oneof![
        8 => (key, value).prop_map(|(k, v)| format!("{k}={v}")),
        1 => ".{0,8}",
    ];
    (name, proptest::collection::vec(item, 0..9))
        .prop_map(|(name, items)| format!("{name}:{}", items.join(",")))
}

fn shape() -> impl Strategy<Value = Shape> {
    let rate = || 0.0..5.0f64;
    let time = || 0.0..400.0f64;
    prop_oneof![
        rate().prop_map(|rate| Shape::Constant { rate }),
        (rate(), rate(), time()).prop_map(|(from, to, at)| Shape::Step { from, to, at }),
        (rate(), rate(), time(), time()).prop_map(|(from, to, start, duration)| Shape::Ramp {
            from,
            to,
            start,
            duration
        }),
        (rate(), rate(), 1.0..400.0f64).prop_map(|(mean, amplitude, period)| Shape::Sinusoid {
            mean,
            amplitude,
            period
        }),
        (rate(), rate(), time(), time(), time(), time()).prop_map(
            |(base, extra, at, rise, hold, decay)| Shape::FlashCrowd {
                base,
                peak: base + extra,
                at,
                rise,
                hold,
                decay
            }
        ),
        (rate(), 0.1..100.0f64, time()).prop_map(|(rate, on, off)| Shape::OnOff { rate, on, off }),
    ]
}

proptest! {
    #[test]
    fn parse_never_panics_on_any_string(spec in ".{0,80}") {
        let _ = Synthetic::parse(&spec);
    }

    #[test]
    fn parse_never_panics_on_near_specs_and_what_it_accepts_is_valid(spec in spec_like()) {
        if let Ok(load) = Synthetic::parse(&spec) {
            prop_assert!(load.validate().is_ok());
            prop_assert_eq!(Synthetic::parse(&load.spec()).unwrap(), load);
        }
    }

    #[test]
    fn every_generated_trace_is_sorted_within_its_duration(
        shape in shape(),
        duration in 0.5..600.0f64,
        prompt in 1u32..4000,
        output in 1u32..1000,
        seed in any::<u64>(),
    ) {
        let load = Synthetic { shape, duration_seconds: duration, prompt_tokens: prompt, output_tokens: output };
        prop_assert!(load.validate().is_ok(), "{:?}", load.validate());
        let trace = load.generate(seed);
        for pair in trace.requests.windows(2) {
            prop_assert!(pair[0].at_seconds <= pair[1].at_seconds);
        }
        for r in &trace.requests {
            prop_assert!((0.0..duration).contains(&r.at_seconds));
            prop_assert!(r.prompt_tokens >= 1 && r.output_tokens >= 1);
            prop_assert!(load.shape.rate_at(r.at_seconds) > 0.0);
        }
        prop_assert_eq!(Synthetic::parse(&load.spec()).unwrap(), load);
    }
}
