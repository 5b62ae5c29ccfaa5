//! Faults on cue (`mds simulate --fault`), one test per kind: the fault really struck, the
//! spec's invariants held at every pass, and nothing stuck after the window (the bound is
//! named in each test).
//!
//! Most runs are the bundled chat example (one vLLM Server role, TokenThroughput at 4,000
//! tokens/s a replica, 1 to 8 replicas, 15 s interval, 300 s pending timeout, 300 s abort
//! cooldown) on a flash crowd: 2 req/s, 10 req/s from 600 s to about 1,230 s, then 2 req/s
//! again until 3,000 s. Fault-free, the scaler shrinks to 1 at 315 s, grows to 4 from 630 s to
//! 675 s and shrinks back to 1 from 1,575 s to 1,725 s.

use crate::common;

use common::manifests;
use std::collections::BTreeMap;
use std::sync::Arc;

use mds_sim::load::{Synthetic, Trace};
use mds_simulate::faults::{AppliedFault, FaultKind, FaultSpec};
use mds_simulate::profile::{DEFAULT_PROFILE, profile};
use mds_simulate::run::{RunOptions, RunReport, run};

const CHAT: &str = include_str!("../../../../examples/simulate/chat.yaml");
const CROWD: &str = "flash-crowd:base=2,peak=10,at=600,rise=30,hold=600,decay=60,duration=3000";

/// The scaler's interval, its pending timeout and its abort cooldown (the defaults).
const INTERVAL: f64 = 15.0;
const PENDING_TIMEOUT: f64 = 300.0;
const COOLDOWN: f64 = 300.0;
/// The longest wait between two tries of a write that failed as unavailable
/// (`mds_worker::failures::MAX_BACKOFF`).
const MAX_BACKOFF: f64 = 300.0;

fn crowd() -> Arc<Trace> {
    Arc::new(Synthetic::parse(CROWD).unwrap().generate(1))
}

/// `manifest` on the crowd under `quota` GPUs of h100-pcie (`None`: unlimited) with
/// `faults`.
fn run_on(manifest: &str, quota: Option<u32>, faults: &[&str]) -> RunReport {
    let (scaler, target) = manifests(manifest);
    let mut options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    if let Some(q) = quota {
        options.quota = BTreeMap::from([("h100-pcie".to_string(), Some(q))]);
    }
    options.faults = faults
        .iter()
        .map(|f| FaultSpec::parse(f).unwrap())
        .collect();
    run(scaler, target, crowd(), "crowd", &options, &mut |_| {}).unwrap()
}

fn chat(faults: &[&str]) -> RunReport {
    run_on(CHAT, None, faults)
}

/// The run held every invariant, and says so with the moment and rule otherwise.
fn held(report: &RunReport) {
    assert!(
        report.violations.is_empty(),
        "invariants broken: {:#?}",
        report.violations
    );
}

fn only_fault(report: &RunReport) -> &AppliedFault {
    assert_eq!(report.faults.len(), 1, "{:#?}", report.faults);
    &report.faults[0]
}

/// The target's counts at `t`: those after the last pass at or before it.
fn counts_at(report: &RunReport, t: f64) -> &BTreeMap<String, i32> {
    report
        .passes
        .iter()
        .take_while(|p| p.t <= t)
        .last()
        .map(|p| &p.replicas)
        .expect("a pass before t")
}

/// The first moment from which `run`'s counts are, to the end, what `base` had within `slack`
/// seconds of the same moment (a fault shifts the passes' phase by a few seconds, and a
/// change by a pass or two), checked every 5 s.
fn follows_from(run: &RunReport, base: &RunReport, slack: f64) -> f64 {
    let end = run.inputs.duration_seconds;
    let steps = (end / 5.0).floor() as i64;
    let mut since = end;
    for k in (0..=steps).rev() {
        let t = k as f64 * 5.0;
        let counts = counts_at(run, t);
        let near = (-(slack as i64)..=slack as i64)
            .step_by(5)
            .any(|d| counts_at(base, (t + d as f64).clamp(0.0, end)) == counts);
        if !near {
            break;
        }
        since = t;
    }
    since
}

/// Asserts that `run` follows `base` again no later than `bound` seconds after `until`.
fn recovers(run: &RunReport, base: &RunReport, until: f64, bound: f64) {
    let since = follows_from(run, base, 30.0);
    assert!(
        since <= until + bound,
        "the counts follow the fault-free run only from {since} s, more than {bound} s after the window closed at {until} s\nwrites: {:?}\nfault-free: {:?}",
        writes(run),
        writes(base)
    );
}

/// Every target write as (t, kind, landed, counts after).
/// The writes from `from` (inclusive) to `until` (exclusive).
fn writes_between(report: &RunReport, from: f64, until: f64) -> Vec<(f64, String, bool, i32)> {
    writes(report)
        .into_iter()
        .filter(|(t, ..)| (from..until).contains(t))
        .collect()
}

fn writes(report: &RunReport) -> Vec<(f64, String, bool, i32)> {
    report
        .passes
        .iter()
        .filter_map(|p| {
            let (kind, landed) = p.write.clone()?;
            let n = p.replicas.values().sum();
            Some((p.t, kind, landed, n))
        })
        .collect()
}

fn server(report: &RunReport, t: f64) -> i32 {
    counts_at(report, t)["server"]
}

#[test]
fn api_conflicts_at_a_rate_are_re_planned_and_the_counts_follow_demand_again() {
    let base = chat(&[]);
    let run = chat(&["api-conflict:rate=0.5,from=500,until=900"]);
    held(&run);
    let fault = only_fault(&run);
    // (a) Writes were answered 409, target patches among them.
    assert_eq!(fault.kind, FaultKind::ApiConflict);
    assert!(fault.events >= 3, "{fault:?}");
    let refused: Vec<_> = writes(&run)
        .into_iter()
        .filter(|(t, _, landed, _)| !landed && (500.0..900.0).contains(t))
        .collect();
    assert!(!refused.is_empty(), "no target write refused: {fault:?}");
    assert!(
        writes(&run)
            .iter()
            .all(|(t, _, landed, _)| *landed || (500.0..900.0).contains(t))
    );
    // (c) A conflict is re-planned at the next pass, never backed off: the crowd's growth
    // still lands inside the window, and from one interval after it the counts are the
    // fault-free run's.
    assert_eq!(server(&run, 899.0), 4, "{:?}", writes(&run));
    recovers(&run, &base, 900.0, INTERVAL);
}

#[test]
fn api_outages_are_retried_with_backoff_and_the_counts_follow_demand_again() {
    let base = chat(&[]);
    let run = chat(&["api-unavailable:from=500,until=900"]);
    held(&run);
    let fault = only_fault(&run);
    // (a) Every write in the window was answered 503: target patches and status writes.
    let note = fault.note.as_deref().unwrap_or_default();
    assert!(
        note.contains("target") && note.contains("status"),
        "{fault:?}"
    );
    let in_window: Vec<_> = writes_between(&run, 500.0, 900.0);
    assert!(!in_window.is_empty() && in_window.iter().all(|(_, _, landed, _)| !landed));
    // The tries back off: each wait is at least the one before.
    let gaps: Vec<f64> = in_window.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(gaps.windows(2).all(|g| g[1] >= g[0]), "{in_window:?}");
    assert_eq!(server(&run, 899.0), 1, "nothing landed in the window");
    // (c) The next try lands within the longest backoff and an interval of the window's
    // end, and the counts follow the fault-free run from then on.
    let landed = writes(&run)
        .into_iter()
        .find(|(t, _, landed, _)| *t >= 900.0 && *landed)
        .expect("a write lands after the outage");
    assert!(landed.0 <= 900.0 + MAX_BACKOFF + INTERVAL, "{landed:?}");
    recovers(&run, &base, 900.0, MAX_BACKOFF + INTERVAL);
}

#[test]
fn a_webhook_outage_fails_target_writes_closed_and_the_first_try_after_it_lands() {
    let base = chat(&[]);
    let run = chat(&["webhook-outage:from=500,until=900"]);
    held(&run);
    let fault = only_fault(&run);
    // (a) Target writes failed (as a webhook that cannot be called fails them: HTTP 500,
    // retried); the status subresource, which no webhook sees, was written.
    assert_eq!(
        fault.note.as_deref(),
        Some(&*format!("target {}", fault.events))
    );
    assert!(fault.events >= 3, "{fault:?}");
    let in_window: Vec<_> = writes_between(&run, 500.0, 900.0);
    assert!(
        in_window.iter().all(|(_, _, landed, _)| !landed),
        "{in_window:?}"
    );
    // (c) Not held as a refusal (a refused commit's counts would wait for a spec change):
    // the next try after the outage lands within the longest backoff and an interval.
    let landed = writes(&run)
        .into_iter()
        .find(|(t, _, landed, _)| *t >= 900.0 && *landed)
        .expect("a write lands after the outage");
    assert!(landed.0 <= 900.0 + MAX_BACKOFF + INTERVAL, "{landed:?}");
    recovers(&run, &base, 900.0, MAX_BACKOFF + INTERVAL);
}

#[test]
fn pages_that_time_out_hold_the_scaler_blind_and_it_catches_up_after() {
    let base = chat(&[]);
    let run = chat(&["scrape-timeout:from=500,until=900"]);
    held(&run);
    let fault = only_fault(&run);
    // (a) Every page in the window timed out: one per ready Pod per sampling (a pass a
    // sampling interval after the last).
    assert!(fault.events >= 25, "{fault:?}");
    // Blind, it neither grows on the crowd nor shrinks.
    let moved: Vec<_> = writes_between(&run, 500.0, 900.0);
    assert!(moved.is_empty(), "{moved:?}");
    // (c) Two valid samples (two intervals) establish the rates again; it grows then.
    recovers(&run, &base, 900.0, 3.0 * INTERVAL);
}

#[test]
fn one_pod_that_does_not_answer_holds_scale_down_until_it_answers_again() {
    let base = chat(&[]);
    // Ordinal 0 does not answer while the fault-free run shrinks from 4 to 1.
    let run = chat(&["scrape-timeout:ordinals=0,from=1500,until=2200"]);
    held(&run);
    assert!(only_fault(&run).events >= 40, "{:?}", run.faults);
    assert!(server(&base, 1800.0) < server(&base, 1500.0));
    // Spec: incomplete coverage prevents scale-down.
    let shrinks: Vec<_> = writes_between(&run, 1500.0, 2200.0);
    assert!(shrinks.is_empty(), "{shrinks:?}");
    // (c) Once it answers, the scale-down windows already span and it shrinks a replica a
    // pass: 3 replicas to shed, an interval each, plus the first sampling.
    recovers(&run, &base, 2200.0, 4.0 * INTERVAL);
}

#[test]
fn garbage_pages_are_a_missing_signal_never_a_number_the_scaler_acts_on() {
    let base = chat(&[]);
    let run = chat(&["scrape-garbage:from=500,until=900"]);
    held(&run);
    // (a) Every page in the window was an error page or unparsable values.
    assert!(only_fault(&run).events >= 25, "{:?}", run.faults);
    // No write in the window: the role reads as missing, which holds scale-down and gives
    // no growth.
    assert!(
        writes(&run)
            .iter()
            .all(|(t, ..)| !(500.0..900.0).contains(t)),
        "{:?}",
        writes(&run)
    );
    // Never a bad decision: no count above what the crowd needed. (Before the fix in
    // mds-signals, an error page was kept as the Pod's baseline, and the first valid page
    // after it counted the engine's whole history as one interval's tokens: the scaler grew
    // to maxReplicas.)
    let most = |r: &RunReport| r.passes.iter().map(|p| p.replicas["server"]).max().unwrap();
    assert!(most(&run) <= most(&base), "{:?}", writes(&run));
    // (c) Two valid samples after the window, and the counts follow the demand again.
    recovers(&run, &base, 900.0, 3.0 * INTERVAL);
}

#[test]
fn half_the_pages_garbage_never_grows_the_target_before_the_crowd() {
    let run = chat(&["scrape-garbage:rate=0.5,from=400,until=1500"]);
    held(&run);
    assert!(only_fault(&run).events >= 20, "{:?}", run.faults);
    // The crowd arrives at 600 s: before it, 2 req/s need one replica.
    for p in run.passes.iter().filter(|p| (400.0..600.0).contains(&p.t)) {
        assert_eq!(p.replicas["server"], 1, "{:?}", writes(&run));
    }
}

#[test]
fn counters_that_restart_from_zero_drop_a_window_and_change_nothing() {
    let base = chat(&[]);
    let run = chat(&["counter-reset:at=700"]);
    held(&run);
    let fault = only_fault(&run);
    // (a) Every Pod answering at the first sampling at or after 700 s restarted its counts.
    assert!(fault.events >= 1, "{fault:?}");
    assert_eq!(
        fault.events as i32,
        run.passes
            .iter()
            .find(|p| p.t >= 700.0)
            .map(|p| p.ready["server"])
            .unwrap(),
        "{fault:?}"
    );
    // (c) A decreased counter drops the Pod's window (D8): no burst, no negative rate, and
    // the run scales as the fault-free one did throughout.
    assert_eq!(follows_from(&run, &base, 30.0), 0.0, "{:?}", writes(&run));
}

#[test]
fn a_quota_that_never_admits_is_rolled_back_at_the_pending_timeout_every_time() {
    let run = chat(&["quota-never-admits:from=500"]);
    held(&run);
    let fault = only_fault(&run);
    // (a) The quota froze at the one GPU the target held; growth was committed and rolled
    // back, more than once.
    assert_eq!(fault.note.as_deref(), Some("quota frozen at h100-pcie=1"));
    assert!(fault.events >= 2, "{fault:?}");
    // (c) Nothing stands: each growth is rolled back within the pending timeout and an
    // interval (the spec's rollback, D18), and the run ends at the one replica admitted.
    let w = writes(&run);
    let grows: Vec<f64> = w
        .iter()
        .filter(|(t, kind, landed, n)| *t > 500.0 && kind == "commit" && *landed && *n > 1)
        .map(|(t, ..)| *t)
        .collect();
    assert!(grows.len() >= 2, "{w:?}");
    for g in &grows {
        let back = w
            .iter()
            .find(|(t, kind, ..)| t > g && kind == "rollback")
            .unwrap_or_else(|| panic!("the growth at {g} s is never rolled back: {w:?}"));
        assert!(
            back.0 - g <= PENDING_TIMEOUT + INTERVAL,
            "rolled back {} s after",
            back.0 - g
        );
    }
    assert_eq!(fault.events as usize, grows.len(), "{w:?}");
    // The world removes the unadmitted ordinal within an interval of the rollback.
    let spells = grows.len() as f64 * (PENDING_TIMEOUT + 2.0 * INTERVAL);
    assert!(run.summary.totals.unadmitted_seconds <= spells, "{w:?}");
}

#[test]
fn a_quota_frozen_for_a_window_gives_growth_back_after_it() {
    let base = chat(&[]);
    let run = chat(&["quota-never-admits:from=500,until=1000"]);
    held(&run);
    assert_eq!(only_fault(&run).events, 1, "{:?}", run.faults);
    // (c) After a rollback the roles wait out a pending timeout before growing again (D29);
    // then growth is admitted and the counts follow the fault-free run's.
    let grown = writes(&run)
        .into_iter()
        .find(|(t, kind, landed, n)| *t >= 1000.0 && kind == "commit" && *landed && *n > 1)
        .expect("growth after the window");
    let rollback = writes(&run)
        .into_iter()
        .find(|(_, kind, ..)| kind == "rollback")
        .unwrap();
    assert!(
        grown.0 <= rollback.0 + PENDING_TIMEOUT + INTERVAL,
        "{grown:?}"
    );
    recovers(
        &run,
        &base,
        1000.0,
        rollback.0 + PENDING_TIMEOUT + INTERVAL - 1000.0,
    );
}

#[test]
fn aborted_retirements_are_restored_and_two_in_a_row_refuse_the_scale_down_for_an_hour() {
    let run = chat(&["retirement-abort:from=1500,until=2200"]);
    held(&run);
    let fault = only_fault(&run);
    let w = writes(&run);
    // (a) Each shrink in the window saw its retirement aborted, and each was restored
    // (D5), the next one only after the cooldown.
    let restores: Vec<f64> = w
        .iter()
        .filter(|(_, kind, ..)| kind == "restore")
        .map(|(t, ..)| *t)
        .collect();
    assert_eq!(restores.len() as u64, fault.events, "{w:?}");
    for pair in restores.windows(2) {
        assert!(pair[1] - pair[0] >= COOLDOWN, "{restores:?}");
    }
    // (b) D35: the second abort in a row refuses the role's scale-down for an hour, fault
    // window or not (the target's aborts look the same either way): no third try, and no
    // shrink in the hour after the second restore.
    assert_eq!(fault.events, 2, "{fault:?}");
    let refused_until = restores[1] + 3600.0;
    let shrink = w.iter().find(|(t, kind, landed, n)| {
        *t > restores[1] && *t < refused_until && kind == "commit" && *landed && {
            let before = w.iter().rev().find(|(u, ..)| u < t).map_or(0, |x| x.3);
            *n < before
        }
    });
    assert!(shrink.is_none(), "{shrink:?} in {w:?}");
}

#[test]
fn an_operator_restart_in_a_pending_cohort_rolls_it_back_when_the_first_worker_would_have() {
    // The quota freezes at 500 s; the crowd's growth at 630 s waits for admission; the
    // operator restarts at 700 s with the cohort pending.
    let quota = "quota-never-admits:from=500,until=1500";
    let alone = chat(&[quota]);
    let run = chat(&[quota, "operator-restart:at=700"]);
    held(&run);
    let restart = &run.faults[1];
    // (a) The worker was replaced while status held the pending cohort; the new one passed
    // within an interval.
    assert_eq!(restart.kind, FaultKind::OperatorRestart);
    assert_eq!(restart.events, 1);
    assert!(
        restart.note.as_deref().unwrap().contains("pendingCohort"),
        "{restart:?}"
    );
    assert!(
        (700.0..700.0 + INTERVAL).contains(&restart.until),
        "{restart:?}"
    );
    assert!(run.passes.iter().any(|p| p.t == restart.until));
    assert!(
        !run.passes
            .iter()
            .any(|p| p.t >= 700.0 && p.t < restart.until)
    );
    // (c) Rebuilt from status alone, the cohort times out when the first worker's would
    // have (its start is in status), within an interval: no second wait.
    let rollback = |r: &RunReport| {
        writes(r)
            .into_iter()
            .find(|(_, kind, ..)| kind == "rollback")
            .map(|(t, ..)| t)
            .unwrap()
    };
    assert!(
        (rollback(&run) - rollback(&alone)).abs() <= INTERVAL,
        "{} against {}",
        rollback(&run),
        rollback(&alone)
    );
    recovers(&run, &alone, restart.until, 0.0);
}

/// Two Server roles on one instance type under 4 GPUs: `chat` serves the crowd, `batch`
/// serves nothing and, held by a 1,800 s scale-down window, donates when chat's growth is
/// rolled back (Opposing rebalance).
const TWO: &str = r#"
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: two, namespace: default}
spec:
  engine: {name: vLLM}
  router: {name: vllm-router}
  roles:
    - {name: chat, kind: Server, replicas: 2, instanceType: h100-pcie}
    - {name: batch, kind: Server, replicas: 2, instanceType: h100-pcie}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeploymentScaler
metadata: {name: two, namespace: default}
spec:
  targetRef: {name: two}
  mode: Active
  sampling: {pendingTimeoutSeconds: 120}
  roles:
    - {name: chat, minReplicas: 1, maxReplicas: 8}
    - {name: batch, minReplicas: 1, maxReplicas: 8}
  behavior: {scaleDown: {stabilizationWindowSeconds: 1800}}
  algorithm:
    type: TokenThroughput
    tokenThroughput: {serverTargetTokensPerSecond: "4000"}
"#;

#[test]
fn an_operator_restart_in_a_rebalance_completes_the_transaction_from_status() {
    let alone = run_on(TWO, Some(4), &[]);
    let w = writes(&alone);
    // Fault-free: chat's growth is rolled back, batch donates one replica (its retirement
    // is the transaction's first leg), then chat receives it.
    let rollback = w.iter().find(|(_, k, ..)| k == "rollback").unwrap().0;
    let donated = w
        .iter()
        .find(|(t, k, ..)| *t > rollback && k == "commit")
        .unwrap()
        .0;
    assert_eq!(counts_at(&alone, donated)["batch"], 1, "{w:?}");
    // Restart between the donor's release and the receiver's acquisition.
    let at = donated + 4.0;
    let run = run_on(TWO, Some(4), &[&format!("operator-restart:at={at}")]);
    held(&run);
    let restart = only_fault(&run);
    // (a) Status held the transaction when the worker was replaced.
    assert!(
        restart.note.as_deref().unwrap().contains("rebalance"),
        "{restart:?}"
    );
    // (c) The new worker completes it: chat receives the donated replica, and the counts
    // follow the fault-free run's within two intervals of the new worker's first pass.
    let received = writes(&run)
        .into_iter()
        .find(|(t, k, ..)| *t >= at && k == "commit")
        .expect("the receiver's leg");
    assert_eq!(counts_at(&run, received.0)["chat"], 3, "{:?}", writes(&run));
    assert_eq!(counts_at(&run, received.0)["batch"], 1);
    recovers(&run, &alone, restart.until, 2.0 * INTERVAL);
}

#[test]
fn a_change_of_leader_waits_out_the_lease_then_rebuilds_from_status() {
    let quota = "quota-never-admits:from=500,until=1500";
    let alone = chat(&[quota]);
    let run = chat(&[quota, "leader-change:at=700"]);
    held(&run);
    let change = &run.faults[1];
    // (a) No pass for the 15 s lease (the old leader died without releasing it), then the
    // new leader's first pass at its offset into the interval.
    assert_eq!((change.kind, change.events), (FaultKind::LeaderChange, 1));
    assert!(
        (715.0..715.0 + INTERVAL).contains(&change.until),
        "{change:?}"
    );
    assert!(
        !run.passes
            .iter()
            .any(|p| p.t >= 700.0 && p.t < change.until)
    );
    assert!(change.note.as_deref().unwrap().contains("pendingCohort"));
    // (c) The pending cohort times out as it would have, and the counts follow.
    let rollback = |r: &RunReport| {
        writes(r)
            .into_iter()
            .find(|(_, kind, ..)| kind == "rollback")
            .map(|(t, ..)| t)
            .unwrap()
    };
    assert!((rollback(&run) - rollback(&alone)).abs() <= INTERVAL);
    recovers(&run, &alone, change.until, 0.0);
}

#[test]
fn a_run_with_every_fault_holds_the_invariants_and_repeats_exactly() {
    let faults = [
        "api-conflict:rate=0.2,from=300,until=1200",
        "api-unavailable:rate=0.2,from=300,until=1200",
        "webhook-outage:from=1300,until=1400",
        "scrape-timeout:rate=0.2",
        "scrape-garbage:rate=0.1",
        "counter-reset:at=650,rate=0.5",
        "quota-never-admits:from=640,until=900",
        "retirement-abort:rate=0.5,from=1500",
        "operator-restart:at=660",
        "leader-change:at=1600",
    ];
    let a = chat(&faults);
    held(&a);
    assert_eq!(a.faults.len(), faults.len());
    let b = chat(&faults);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["faults"][0]["kind"], "api-conflict");
    assert_eq!(json["faults"][0]["from"], 300.0);
    assert_eq!(json["faults"][0]["until"], 1200.0);
}
