//! The profiles fitted to measured kernels (tools/profiles/fit.py) hold to what they were
//! fitted on (the composed kernel step times, checked in as data/kernel-steps.csv) and to
//! the measured end-to-end serving of their model, GPU and engine (data/serving-points.csv,
//! from aiconfigurator's `silicon_sample.csv`), replayed through the request engine.

use mds_sim::calibration::{
    ARGONNE_PREFILL, Measured, Offered, POINTS, Point, Statistic, errors, reproduce,
};
use mds_sim::engine::request::{StepWork, attention_pairs};
use mds_sim::profile::{FITTED, Fitted, profile};

const KERNEL_STEPS: &str = include_str!("../../data/kernel-steps.csv");
const SERVING_POINTS: &str = include_str!("../../data/serving-points.csv");

fn fitted(name: &str) -> &'static Fitted {
    FITTED
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("{name} is not a fitted profile"))
}

fn rows(csv: &str) -> impl Iterator<Item = Vec<&str>> {
    csv.lines().skip(1).map(|l| l.split(',').collect())
}

#[test]
fn every_fitted_profile_reproduces_its_kernel_steps() {
    for f in FITTED {
        let mut errors = Vec::new();
        for row in rows(KERNEL_STEPS).filter(|r| r[0] == f.name) {
            let n = |i: usize| row[i].parse::<u64>().unwrap();
            // `prompts` equal chunks of the step's prefill, each after `prefix` tokens.
            let (prefill, prefix, decodes, context, prompts) = (n(1), n(2), n(3), n(4), n(5));
            let kernel: f64 = row[6].parse().unwrap();
            let work = StepWork {
                prefill_tokens: prefill,
                attention_pairs: if prefill > 0 {
                    prompts * attention_pairs(prefix, prefill / prompts)
                } else {
                    0
                },
                decode_sequences: decodes,
                kv_tokens: decodes * context
                    + if prefill > 0 {
                        prefill + prompts * prefix
                    } else {
                        0
                    },
            };
            // The kernel part alone: the host terms are not in the tables.
            let host = f.host_step_seconds + f.host_decode_seconds * decodes as f64;
            let model = f.cost().step_seconds(&work) - host;
            errors.push(model / kernel - 1.0);
        }
        assert!(errors.len() > 80, "{}: {} steps", f.name, errors.len());
        let worst = errors.iter().fold(0.0_f64, |w, e| w.max(e.abs()));
        let mean = errors.iter().map(|e| e.abs()).sum::<f64>() / errors.len() as f64;
        assert!(
            (worst - f.fit_error).abs() < 1e-3,
            "{}: worst {worst:.4}, generated {:.4}: rerun tools/profiles/fit.py",
            f.name,
            f.fit_error
        );
        assert!(mean < 0.12, "{}: mean error {mean:.3}", f.name);
    }
}

/// A measured serving point: a closed loop of `concurrency` clients, prompts of `isl`
/// tokens and outputs of `osl`.
struct Served {
    profile: &'static str,
    concurrency: u64,
    isl: u64,
    osl: u64,
    ttft: f64,
    tpot: f64,
}

fn served() -> Vec<Served> {
    rows(SERVING_POINTS)
        .map(|r| Served {
            profile: fitted(r[0]).name,
            concurrency: r[2].parse().unwrap(),
            isl: r[3].parse().unwrap(),
            osl: r[4].parse().unwrap(),
            ttft: r[5].parse::<f64>().unwrap() / 1e3,
            tpot: r[6].parse::<f64>().unwrap() / 1e3,
        })
        .collect()
}

/// The model's (TTFT, TPOT, output tokens/s) errors on one point; the measured throughput
/// is Little's law over the published means.
fn replay(s: &Served) -> (f64, f64, f64) {
    let p = profile(s.profile).unwrap();
    let point = Point {
        source: "aiconfigurator silicon_sample",
        engine: "measured",
        gpu: fitted(s.profile).gpu.hardware(),
        offered: Offered::Closed {
            concurrency: s.concurrency,
            count: 3 * s.concurrency,
        },
        prompt_tokens: s.isl,
        output_tokens: s.osl,
        spread_outputs: false,
        statistic: Statistic::Mean,
        published: Measured::default(),
        held_out: true,
    };
    let m = reproduce(&point, p.request);
    let throughput = s.concurrency as f64 * s.osl as f64 / (s.ttft + (s.osl - 1) as f64 * s.tpot);
    (
        m.ttft_seconds.unwrap() / s.ttft - 1.0,
        m.tpot_seconds.unwrap() / s.tpot - 1.0,
        m.output_tokens_per_second.unwrap() / throughput - 1.0,
    )
}

/// Mean and largest absolute relative error.
fn spread(errors: &[f64]) -> (f64, f64) {
    let mean = errors.iter().map(|e| e.abs()).sum::<f64>() / errors.len().max(1) as f64;
    (mean, errors.iter().fold(0.0_f64, |w, e| w.max(e.abs())))
}

/// A point is sound when the kernels could have done its work at all: every client's prompt
/// computed once (at the profile's cost per prompt token, the dense layers' compute alone)
/// fits in one measured request cycle (TTFT and every later token). A run that beat that
/// served its prompts from a cache the point does not record.
fn sound(s: &Served) -> bool {
    let f = fitted(s.profile);
    let prompts = s.concurrency as f64 * s.isl as f64 * f.prefill_token_seconds;
    prompts <= s.ttft + (s.osl - 1) as f64 * s.tpot
}

/// What each profile is held to: mean and largest TPOT error, mean throughput error. Two
/// are held looser, at the size of what they miss:
/// - the 8B on H100 SXM is held to TensorRT-LLM's runs (no vLLM run of it is in the data), a
///   cross-engine reference;
/// - vLLM's fp8 8B on an H200 at short outputs: each step carries the clients' prompt chunks
///   beside their decodes, and the cost model adds the chunks' compute to the decodes' KV
///   reads where the GPU overlaps them (TPOT up to 50 % high at 8k prompts, 100 outputs).
///   Its runs (vLLM 0.12) also show less host time per decode sequence than the 40 us the
///   published vLLM 0.8.5 and 0.9 runs fit (`fit_vllm_host_decode`): mean TPOT 27 % high
///   without it, 40 % with it.
fn bounds(name: &str) -> (f64, f64, f64) {
    match name {
        "llama3.1-8b-h100sxm-vllm" => (0.20, 0.35, 0.30),
        "llama3.1-8b-fp8-h200-vllm" => (0.40, 0.60, 0.25),
        _ => (0.15, 0.30, 0.20),
    }
}

#[test]
fn fitted_profiles_hold_to_measured_serving() {
    let points = served();
    let mut names: Vec<&str> = points.iter().map(|s| s.profile).collect();
    names.dedup();
    let mut checked = 0;
    let mut failures = Vec::new();
    for name in names {
        let (mut ttft, mut tpot, mut throughput) = (Vec::new(), Vec::new(), Vec::new());
        let mut unsound = 0;
        for s in points.iter().filter(|s| s.profile == name) {
            if !sound(s) {
                unsound += 1;
                continue;
            }
            let (a, b, c) = replay(s);
            if std::env::var_os("MDS_SERVING_ROWS").is_some() {
                println!(
                    "  c{} {}/{}: TTFT {:+.0} %, TPOT {:+.0} %, tok/s {:+.0} %",
                    s.concurrency,
                    s.isl,
                    s.osl,
                    a * 100.0,
                    b * 100.0,
                    c * 100.0
                );
            }
            ttft.push(a);
            tpot.push(b);
            throughput.push(c);
        }
        let (t_mean, t_max) = spread(&tpot);
        let (o_mean, o_max) = spread(&throughput);
        let (f_mean, _) = spread(&ttft);
        println!(
            "{name:36} {:>3} points ({unsound} unsound)  TPOT {:4.1} / {:4.1} %  \
             tok/s {:4.1} / {:4.1} %  TTFT {:4.1} %",
            tpot.len(),
            t_mean * 100.0,
            t_max * 100.0,
            o_mean * 100.0,
            o_max * 100.0,
            f_mean * 100.0
        );
        if tpot.is_empty() {
            continue;
        }
        checked += tpot.len();
        let (mean_bound, max_bound, throughput_bound) = bounds(name);
        if t_mean > mean_bound || t_max > max_bound || o_mean > throughput_bound {
            failures.push(name);
        }
    }
    assert!(failures.is_empty(), "past their bounds: {failures:?}");
    assert!(checked >= 100, "{checked} sound points");
}

#[test]
fn a_run_faster_than_its_own_prompts_is_unsound() {
    // vLLM's fp8 8B on an H200: 112 clients of 1,000-token prompts, a request cycle of
    // 72 ms + 99 × 11.25 ms. Their prompts alone take longer than that on the kernels.
    let s = served()
        .into_iter()
        .find(|s| s.profile == "llama3.1-8b-fp8-h200-vllm" && s.concurrency == 112)
        .unwrap();
    assert!(!sound(&s));
    // The 70B's runs are sound.
    assert!(
        served()
            .iter()
            .filter(|s| s.profile.starts_with("llama3.1-70b"))
            .all(sound)
    );
}

#[test]
fn the_pcie_profile_from_sxm_kernels_holds_to_pcie_runs_it_never_saw() {
    // H100 PCIe has no kernel tables: its profile is the SXM's kernels scaled by the cards'
    // peaks. IOG's vLLM 0.8.5 runs on an H100 PCIe (module calibration) check it, held out.
    let p = profile("llama3.1-8b-h100pcie-vllm").unwrap();
    let mut checked = 0;
    for point in POINTS.iter().filter(|p| p.source == "IOG") {
        let [_, tpot, throughput] = errors(point, p.request);
        let tpot = tpot.unwrap();
        assert!(tpot.abs() <= 0.20, "{:?}: TPOT {tpot:+.3}", point.offered);
        if let Some(throughput) = throughput {
            assert!(
                throughput.abs() <= 0.10,
                "{:?}: {throughput:+.3}",
                point.offered
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 5);
}

/// The published vLLM V1 runs of Llama-3 8B on one H100 (module calibration), each on the
/// kernel profile of its GPU: IOG on the PCIe card, vllm#18566 taken as the SXM.
fn published_v1_runs() -> impl Iterator<Item = (&'static str, &'static Point)> {
    POINTS.iter().filter_map(|p| match p.source {
        "IOG" => Some(("llama3.1-8b-h100pcie-vllm", p)),
        "vLLM #18566" => Some(("llama3.1-8b-h100sxm-vllm", p)),
        _ => None,
    })
}

#[test]
fn the_kernel_profiles_decode_as_published_vllm_v1_runs_did_with_hundreds_running() {
    // Decode at hundreds of running sequences: vllm#18566's burst of 1,000 and IOG's 32 QPS
    // (about 100 running) within 15 % TPOT, every IOG rate too. Without vLLM's host time per
    // decode sequence (40 us, tools/profiles/fit.py) the burst's TPOT is 42 % optimistic.
    for (name, point) in published_v1_runs() {
        let [_, tpot, _] = errors(point, profile(name).unwrap().request);
        let tpot = tpot.unwrap();
        assert!(
            tpot.abs() <= 0.15,
            "{name} on {} {:?}: TPOT {tpot:+.3}",
            point.source,
            point.offered
        );
    }
}

#[test]
fn the_kernel_profile_prefills_a_burst_as_published() {
    // Sixteen 1,024-token prompts reaching an idle H100 SXM together, two steps of eight:
    // Argonne's batch latency (the slowest request's TTFT, vLLM's V0 engine with its host time
    // per step) within 35 %. The goal is 30 %; the model misses it by two points, and says
    // where: its linear cost prices a packed 8,192-token step 11 % under the kernels the fit
    // composed, and the kernels themselves (2026's, at 75-80 % of the GPU's peak) are 23 %
    // faster than that mid-2024 run (TensorRT-LLM's was 0.405 s there). Fitted on single
    // prompts alone, before, the profile was 40 % fast.
    let fitted = fitted("llama3.1-8b-h100sxm-vllm");
    let mut v0 = fitted.request();
    v0.cost.step_overhead_seconds =
        fitted.kernel_fixed_seconds + mds_sim::calibration::ARGONNE_STEP_HOST_SECONDS;
    let [ttft, _, _] = errors(&ARGONNE_PREFILL, v0);
    let ttft = ttft.unwrap();
    assert!(
        (-0.35..=0.30).contains(&ttft),
        "Argonne 16 x 1,024 prefill: TTFT {ttft:+.3}"
    );
    eprintln!("Argonne 16 x 1,024 prefill on the SXM kernel profile: TTFT {ttft:+.3}");
}

/// vLLM's host time per decode sequence, fitted on the published V1 runs (the value
/// tools/profiles/fit.py fixes): prints each candidate's TPOT errors and the worst.
#[test]
#[ignore = "the fit itself, run by hand"]
fn fit_vllm_host_decode() {
    for micros in (0..=60).step_by(5) {
        let mut worst = 0.0_f64;
        let mut line = String::new();
        for (name, point) in published_v1_runs() {
            let fitted = fitted(name);
            let mut p = fitted.request();
            p.cost.decode_sequence_seconds = fitted.kernel_decode_seconds + micros as f64 * 1e-6;
            let tpot = errors(point, p)[1].unwrap();
            worst = worst.max(tpot.abs());
            line += &format!(" {tpot:+.3}");
        }
        println!("{micros:2} us: worst {worst:.3}:{line}");
    }
}
