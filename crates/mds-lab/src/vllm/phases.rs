//! A load profile as the load client's phases: spans of constant rate and lengths, each run by
//! one `vllm bench serve` pass. Ramps become steps of [`RAMP_STEP_SECONDS`] at their mean rate;
//! adjacent equal phases merge; an open end stops at the horizon.

use mds_sim::{Load, LoadProfile};

/// How finely a ramp is cut into constant steps.
pub const RAMP_STEP_SECONDS: f64 = 15.0;

/// One span of constant load, from `start` (UNIX seconds) for `seconds`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phase {
    pub start: f64,
    pub seconds: f64,
    pub rps: f64,
    /// Prompt tokens, the shared prefix (`prefix`) included.
    pub prompt: u32,
    pub output: u32,
    /// Leading prompt tokens every request of the phase shares (served by the prefix cache).
    pub prefix: u32,
}

/// The phases of `profile` whose time axis starts at `origin` (UNIX seconds), up to `horizon`
/// seconds after the origin for a profile that never ends. Idle spans are left out.
pub fn phases(profile: &LoadProfile, origin: f64, horizon: f64) -> Vec<Phase> {
    let mut out: Vec<Phase> = Vec::new();
    for segment in profile.segments() {
        let end = segment.end.min(horizon);
        let mut t = segment.start;
        while t < end {
            let ramp = segment.from != segment.to;
            let step_end = if ramp {
                (t + RAMP_STEP_SECONDS).min(end)
            } else {
                end
            };
            let load = profile.load_at((t + step_end) / 2.0);
            push(&mut out, origin + t, step_end - t, load);
            t = step_end;
        }
    }
    out
}

fn push(out: &mut Vec<Phase>, start: f64, seconds: f64, load: Load) {
    if load.requests_per_second <= 0.0 || seconds <= 0.0 {
        return;
    }
    let prompt = load.prompt_tokens.round().max(1.0) as u32;
    let phase = Phase {
        start,
        seconds,
        rps: load.requests_per_second,
        prompt,
        output: load.output_tokens.round().max(1.0) as u32,
        prefix: ((load.prefix_hit_fraction * f64::from(prompt)).round() as u32).min(prompt - 1),
    };
    if let Some(last) = out.last_mut()
        && (last.start + last.seconds - start).abs() < 1e-9
        && (Phase {
            start: last.start,
            seconds: last.seconds,
            ..phase
        }) == *last
    {
        last.seconds += seconds;
        return;
    }
    out.push(phase);
}

/// The `--phases` argument of the load client.
pub fn to_json(phases: &[Phase]) -> String {
    let items: Vec<serde_json::Value> = phases
        .iter()
        .map(|p| {
            serde_json::json!({
                "start": p.start, "seconds": p.seconds, "rps": p.rps,
                "prompt": p.prompt, "output": p.output, "prefix": p.prefix,
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(rps: f64) -> Load {
        Load::new(rps, 512.0, 64.0, 0.25).unwrap()
    }

    #[test]
    fn steps_become_one_phase_each_and_the_open_end_stops_at_the_horizon() {
        let profile =
            LoadProfile::steps(&[(0.0, load(1.0)), (60.0, load(3.0)), (120.0, load(0.0))]).unwrap();
        let got = phases(&profile, 1000.0, 600.0);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(
            (got[0].start, got[0].seconds, got[0].rps),
            (1000.0, 60.0, 1.0)
        );
        assert_eq!(
            (got[1].start, got[1].seconds, got[1].rps),
            (1060.0, 60.0, 3.0)
        );
        assert_eq!(
            (got[1].prompt, got[1].output, got[1].prefix),
            (512, 64, 128)
        );
        let open = LoadProfile::constant(load(2.0)).unwrap();
        let got = phases(&open, 0.0, 300.0);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].seconds, 300.0);
    }

    #[test]
    fn a_ramp_is_cut_into_steps_at_their_mean_rate() {
        let profile = LoadProfile::ramp(load(1.0), load(4.0), 0.0, 60.0).unwrap();
        let got = phases(&profile, 0.0, 60.0);
        let rates: Vec<f64> = got.iter().map(|p| p.rps).collect();
        assert_eq!(rates, vec![1.375, 2.125, 2.875, 3.625]);
        assert!(got.iter().all(|p| p.seconds == RAMP_STEP_SECONDS));
    }

    #[test]
    fn equal_neighbours_merge_and_idle_spans_are_left_out() {
        let profile = LoadProfile::steps(&[
            (0.0, load(2.0)),
            (30.0, load(2.0)),
            (60.0, Load::IDLE),
            (90.0, load(2.0)),
        ])
        .unwrap();
        let got = phases(&profile, 0.0, 120.0);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!((got[0].start, got[0].seconds), (0.0, 60.0));
        assert_eq!((got[1].start, got[1].seconds), (90.0, 30.0));
    }

    #[test]
    fn the_client_reads_every_field() {
        let json = to_json(&phases(
            &LoadProfile::constant(load(1.5)).unwrap(),
            10.0,
            20.0,
        ));
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value[0]["rps"], 1.5);
        assert_eq!(value[0]["prefix"], 128);
        assert_eq!(value[0]["start"], 10.0);
    }
}
