//! examples/simulate/pd.yaml on the bundled code trace under 4 GPUs, the run of
//! `mds simulate --scaler examples/simulate/pd.yaml --trace bundled:azure-2023-code
//! --quota h100-pcie=4 --compare none`: at 225 s the scaler commits decode 1->2 and prefill
//! 2->3 (5 GPUs); decode's new replica is admitted, prefill's is not, and at 346 s the pending
//! cohort's timeout rolls both back. GPUStack refuses every Prefill/Decode retirement
//! (TARGET.md section 5), so the retirement of prefill 2 goes `Aborted` and stays, keeping
//! both removed replicas. Before the fix the scaler recorded no scale-down for the rollback and
//! so never restored it: for the rest of the hour the target said (prefill 2, decode 1) while
//! (3, 2) ran, and nothing the scaler did could change it. The spec and D5 restore an aborted
//! retirement's pre-scale-down vector; GPUStack adopts the held replicas.

use crate::common;

use common::manifests;
use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mds_sim::InstanceState;
use mds_sim::load::Trace;
use mds_simulate::profile::{DEFAULT_PROFILE, profile};
use mds_simulate::run::{RunOptions, run_seconds, scenario, start};
use mds_simulate::{PassRecord, Simulation};

const EXAMPLE: &str = include_str!("../../../../examples/simulate/pd.yaml");
const CODE: &str = include_str!("../../../../data/traces/azure-2023-code.csv");

/// What a user would see at one moment: the target's counts, what the world holds, the
/// target's retirement and the scaler's `Blocked` condition.
#[derive(Debug)]
struct Moment {
    t: f64,
    /// The target's `spec.roles[].replicas`.
    spec: BTreeMap<String, i32>,
    /// Instances the world holds per role (pending ones included, terminating ones not).
    held: BTreeMap<String, i32>,
    /// Ordinals waiting for admission.
    waiting: Vec<String>,
    /// `status.retirement` as (role/ordinal, state).
    retirement: Option<(String, String)>,
    blocked: (String, String),
}

/// Runs the example with `quota` GPUs of h100-pcie, looking every 15 s; `at` may change the
/// world first at a moment (in seconds).
fn watch(quota: u32, at: &mut dyn FnMut(f64, &mut Simulation)) -> (Vec<Moment>, Vec<PassRecord>) {
    let (scaler, target) = manifests(EXAMPLE);
    let trace = Arc::new(Trace::parse_azure_csv(CODE).unwrap());
    let mut options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    options.quota = BTreeMap::from([("h100-pcie".to_string(), Some(quota))]);
    let end = start() + SignedDuration::from_secs_f64(run_seconds(&trace, &options));
    let mut sim = Simulation::new(scenario(scaler, target, trace, &options).unwrap()).unwrap();
    let mut moments = Vec::new();
    let mut passes = Vec::new();
    let mut until: Timestamp = start();
    while until < end {
        until = (until + SignedDuration::from_secs(15)).min(end);
        let t = until.duration_since(start()).as_secs_f64();
        at(t, &mut sim);
        passes.extend(sim.run_until(until).unwrap());
        let md = sim.target_now().unwrap();
        let status = sim.scaler_now().unwrap().status.unwrap_or_default();
        let instances = sim.instances_now();
        let mut held = BTreeMap::new();
        for i in instances
            .iter()
            .filter(|i| i.state != InstanceState::Terminating)
        {
            *held.entry(i.role.clone()).or_insert(0) += 1;
        }
        let blocked = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Blocked")
            .map(|c| (c.reason.clone(), c.message.clone()))
            .unwrap_or_default();
        moments.push(Moment {
            t,
            spec: md
                .spec
                .roles
                .iter()
                .map(|r| (r.name.clone(), r.replicas()))
                .collect(),
            held,
            waiting: instances
                .iter()
                .filter(|i| {
                    matches!(
                        i.state,
                        InstanceState::Composing
                            | InstanceState::Queued
                            | InstanceState::Parked
                            | InstanceState::QuotaReserved
                    )
                })
                .map(|i| format!("{}/{}", i.role, i.ordinal))
                .collect(),
            retirement: md
                .status
                .as_ref()
                .and_then(|s| s.retirement.as_ref())
                .map(|r| {
                    (
                        format!("{}/{}", r.role_name, r.replica_ordinal),
                        r.state.clone(),
                    )
                }),
            blocked,
        });
    }
    assert!(
        sim.violations().is_empty(),
        "invariants: {:#?}",
        sim.violations()
    );
    (moments, passes)
}

/// The longest spell, in seconds, of consecutive moments matching `bad`, with where it began.
fn longest(moments: &[Moment], bad: impl Fn(&Moment) -> bool) -> (f64, f64) {
    let mut worst = (0.0, 0.0);
    let mut since: Option<f64> = None;
    for m in moments {
        if bad(m) {
            let from = *since.get_or_insert(m.t);
            if m.t - from > worst.0 {
                worst = (m.t - from, from);
            }
        } else {
            since = None;
        }
    }
    worst
}

fn writes(passes: &[PassRecord]) -> Vec<(f64, String)> {
    passes
        .iter()
        .filter_map(|p| p.write.as_ref().map(|(kind, _)| (p.t, kind.clone())))
        .collect()
}

#[test]
fn a_rolled_back_pd_cohort_whose_retirement_aborts_is_restored_to_what_runs() {
    let (moments, passes) = watch(4, &mut |_, _| {});
    let writes = writes(&passes);
    let rollback = writes
        .iter()
        .find(|(_, kind)| kind == "rollback")
        .map(|(t, _)| *t)
        .unwrap_or_else(|| panic!("the 5-GPU cohort is rolled back: {writes:?}"));
    let restore = writes
        .iter()
        .find(|(t, kind)| *t > rollback && kind == "restore")
        .map(|(t, _)| *t)
        .unwrap_or_else(|| panic!("the aborted retirement is restored: {writes:?}"));
    assert!(
        restore - rollback <= 30.0,
        "restored {} s after the rollback",
        restore - rollback
    );
    let after = moments.iter().find(|m| m.t > restore).unwrap();
    assert_eq!(
        after.spec, after.held,
        "the counts are what runs: {after:?}"
    );
    // (a) Whenever the counts and the world disagree (a rollback or a planned P/D shrink that
    // GPUStack refuses), they agree again within two passes; before the fix, for 3200 s.
    let (spell, from) = longest(&moments, |m| m.spec != m.held);
    assert!(
        spell <= 30.0,
        "the counts disagreed with the world for {spell} s from {from} s: {:?}",
        moments.iter().find(|m| m.t == from)
    );
    // (b) No `Aborted` reservation is left standing: the restore lets GPUStack adopt it.
    let (spell, from) = longest(&moments, |m| {
        m.retirement.as_ref().is_some_and(|(_, s)| s == "Aborted")
    });
    assert!(spell <= 30.0, "Aborted for {spell} s from {from} s");
    // What holds after the restore, and what releases it: prefill 2 still waits for quota, so
    // growth waits (D18) until it is admitted (the next test) and says so; scale-down waits
    // for the cooldown and no longer.
    let growth_hold = moments.iter().find(|m| {
        m.t > restore && m.blocked.0 == "PacingBounded" && m.blocked.1.contains("growth waits")
    });
    let growth_hold = growth_hold.unwrap_or_else(|| {
        panic!(
            "Blocked never names the admission growth waits for: {:?}",
            moments
                .iter()
                .filter(|m| m.t > restore)
                .map(|m| &m.blocked)
                .collect::<Vec<_>>()
        )
    });
    assert!(
        growth_hold.blocked.1.contains("the admission of prefill/2")
            && growth_hold.waiting == ["prefill/2"],
        "{growth_hold:?}"
    );
    assert!(
        moments
            .iter()
            .any(|m| m.t > restore && m.blocked.0 == "ScaleDownAborted"),
        "the cooldown is reported"
    );
    // Scale-down is not held for ever: once the cooldown ends the planner commits again (here
    // a joint shrink when demand falls, which GPUStack refuses in turn and which is restored).
    assert!(
        writes
            .iter()
            .any(|(t, kind)| *t > restore + 300.0 && kind == "commit"),
        "nothing committed after the cooldown: {writes:?}"
    );
}

#[test]
fn growth_held_by_the_unadmitted_prefill_resumes_once_quota_frees() {
    // An administrator raises the quota to 6 GPUs at 900 s.
    let raised = 900.0;
    let (moments, passes) = watch(4, &mut |t, sim| {
        if t == raised {
            sim.set_quota("h100-pcie", Some(6));
        }
    });
    // (`watch` changes the world before it runs to the moment, so the last one before the
    // raise is 15 s earlier.)
    let before = moments.iter().find(|m| m.t == raised - 15.0).unwrap();
    assert_eq!(
        before.waiting,
        ["prefill/2"],
        "held by quota until then: {before:?}"
    );
    assert_eq!(before.spec, before.held, "the target counts prefill 2");
    // prefill 2 is admitted at once and nothing waits until the scaler grows again.
    let admitted = moments
        .iter()
        .find(|m| m.t > raised && m.waiting.is_empty())
        .unwrap();
    assert!(admitted.t <= raised + 30.0, "{admitted:?}");
    let grew = passes.iter().find(|p| {
        p.t > raised
            && p.write
                .as_ref()
                .is_some_and(|(kind, ok)| kind == "commit" && *ok)
            && p.replicas["prefill"] + p.replicas["decode"] > 5
    });
    assert!(
        grew.is_some(),
        "growth resumes once prefill 2 is admitted: {:?}",
        writes(&passes)
    );
}
