//! Lowering replicas runs TARGET.md section 5's removal: its states in order, its budgets, and
//! the cases that abort.

use crate::common;

use common::*;
use jiff::SignedDuration;
use mds_api::target::annotation_keys::RETIREMENT_RETRY;
use mds_sim::{Load, LoadProfile, World};

fn some(states: &[&str]) -> Vec<Option<String>> {
    states.iter().map(|s| Some(s.to_string())).collect()
}

/// A ready three-instance server deployment carrying load.
fn serving(router: bool, engine: &str) -> (World, mds_sim::DeploymentKey) {
    let mut world = world(0);
    let k = world
        .apply_deployment(target(
            "chat",
            engine,
            router,
            &[("server", "Server", 3, 1)],
        ))
        .unwrap();
    let load = Load::new(6.0, 1000.0, 200.0, 0.0).unwrap();
    world
        .set_load(&k, "server", LoadProfile::constant(load).unwrap())
        .unwrap();
    world.advance_to(t(60)).unwrap();
    (world, k)
}

#[test]
fn with_a_router_a_removal_runs_to_completion_highest_ordinal_first() {
    let (mut world, k) = serving(true, "vLLM");
    set_replicas(&mut world, &k, "server", 2);
    let generation = world.deployment(&k).unwrap().metadata.generation;
    world.step(t(61)).unwrap();
    let r = retirement(&world, &k).expect("a retirement starts");
    assert_eq!((r.role_name.as_str(), r.replica_ordinal), ("server", 2));
    assert_eq!(r.observed_generation, generation);
    assert_eq!(r.target_member_uids.len(), 1);
    let workload_uid = r.target_workload_uid.clone().unwrap();
    let s = role_status(&world, &k, "server");
    assert_eq!(
        (s.desired, s.ready),
        (Some(2), Some(2)),
        "desired drops at once; the departing instance is not counted"
    );
    let withdrawn = world.pods(&k).into_iter().find(|p| p.ordinal == 2).unwrap();
    assert!(
        !withdrawn
            .metadata
            .labels
            .unwrap()
            .contains_key("modeldeployment.gpustack.ai/endpoint-eligible")
    );

    let mut observed = vec![Some(r.state)];
    observed.extend(retirement_states(&mut world, &k, t(200)));
    observed.dedup();
    let mut expected = some(&[
        "Admitted",
        "Disqualified",
        "Withdrawing",
        "Draining",
        "Deleting",
        "Settling",
    ]);
    expected.push(None);
    assert_eq!(observed, expected);
    assert!(
        world.pods(&k).iter().all(|p| p.ordinal < 2),
        "no Pod of the ordinal is left"
    );
    assert!(
        world
            .workloads(&k)
            .iter()
            .all(|w| w.metadata.uid.as_deref() != Some(workload_uid.as_str()))
    );
    assert_eq!(world.quota_usage()["h100"].reserved, 2);
    assert_eq!(
        world
            .deployment(&k)
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .phase
            .as_deref(),
        Some("Ready")
    );
}

#[test]
fn the_draining_instance_finishes_its_requests_before_deletion() {
    let (mut world, k) = serving(true, "SGLang");
    set_replicas(&mut world, &k, "server", 2);
    let mut deleting_at = None;
    let mut last_busy = None;
    for s in 61..200 {
        world.step(t(s)).unwrap();
        let state = retirement(&world, &k).map(|r| r.state);
        if let Some(i) = world.instances(&k).iter().find(|i| i.ordinal == 2)
            && let Some(e) = &i.engine
            && !e.is_idle()
        {
            last_busy = Some(s);
        }
        if state.as_deref() == Some("Deleting") && deleting_at.is_none() {
            deleting_at = Some(s);
        }
    }
    let (deleting, busy) = (deleting_at.unwrap(), last_busy.unwrap());
    assert!(
        busy > 65,
        "the instance held requests when withdrawn (busy until {busy})"
    );
    assert!(
        deleting >= busy + 2,
        "two idle reads after the last busy one: {busy} then {deleting}"
    );
}

#[test]
fn without_a_router_the_withdrawal_phase_expires_and_the_abort_persists() {
    let (mut world, k) = serving(false, "vLLM");
    set_replicas(&mut world, &k, "server", 2);
    let states = retirement_states(&mut world, &k, t(120));
    assert_eq!(states, some(&["Admitted", "Aborted"]));
    let r = retirement(&world, &k).unwrap();
    let started = r.started_at.unwrap().0;
    assert_eq!(r.phase_started_at.unwrap().0, started);
    assert_eq!(
        r.deadline.unwrap().0,
        started + SignedDuration::from_secs(300)
    );
    assert!(r.reason.unwrap().contains("router"));
    let s = role_status(&world, &k, "server");
    assert_eq!(
        (s.desired, s.ready, s.quota_reserved),
        (Some(2), Some(3), Some(3)),
        "the held instance is alive"
    );
    assert!(
        world.check_invariants().is_empty(),
        "{:?}",
        world.check_invariants()
    );

    // A further removal is refused while the reservation exists.
    set_replicas(&mut world, &k, "server", 1);
    world.advance_to(t(200)).unwrap();
    assert_eq!(world.instances(&k).len(), 3);
    assert_eq!(retirement(&world, &k).unwrap().replica_ordinal, 2);

    // Restoring the pre-scale-down count adopts the held instance: nothing is recreated.
    let uids: Vec<_> = world
        .pods(&k)
        .iter()
        .map(|p| p.metadata.uid.clone())
        .collect();
    set_replicas(&mut world, &k, "server", 3);
    world.step(t(201)).unwrap();
    assert!(retirement(&world, &k).is_none());
    let after: Vec<_> = world
        .pods(&k)
        .iter()
        .map(|p| p.metadata.uid.clone())
        .collect();
    assert_eq!(after, uids);
    assert_eq!(role_status(&world, &k, "server").ready, Some(3));
}

#[test]
fn the_time_an_abort_takes_is_the_withdrawal_budget() {
    let (mut world, k) = serving(false, "vLLM");
    set_replicas(&mut world, &k, "server", 2);
    world.advance_to(t(90)).unwrap();
    assert_eq!(
        retirement(&world, &k).unwrap().state,
        "Admitted",
        "29 s into the phase"
    );
    world.step(t(91)).unwrap();
    assert_eq!(retirement(&world, &k).unwrap().state, "Aborted", "30 s");
}

#[test]
fn prefill_and_decode_instances_are_refused_outright() {
    let mut world = world(0);
    let k = world
        .apply_deployment(target(
            "pd",
            "SGLang",
            true,
            &[("prefill", "Prefill", 2, 1), ("decode", "Decode", 2, 1)],
        ))
        .unwrap();
    world.advance_to(t(10)).unwrap();
    set_replicas(&mut world, &k, "decode", 1);
    world.step(t(11)).unwrap();
    let r = retirement(&world, &k).unwrap();
    assert_eq!(
        (r.role_name.as_str(), r.replica_ordinal, r.state.as_str()),
        ("decode", 1, "Aborted")
    );
    assert!(r.reason.unwrap().contains("disaggregated"));
    assert_eq!(role_status(&world, &k, "decode").ready, Some(2));
}

#[test]
fn a_gpustack_that_completes_disaggregated_retirements_retires_them() {
    let config = mds_sim::WorldConfig {
        abort_disaggregated_retirements: false,
        ..mds_sim::WorldConfig::default()
    };
    let mut world = World::new(config, t(0)).unwrap();
    let k = world
        .apply_deployment(target(
            "pd",
            "SGLang",
            true,
            &[("prefill", "Prefill", 2, 1), ("decode", "Decode", 2, 1)],
        ))
        .unwrap();
    world.advance_to(t(10)).unwrap();
    set_replicas(&mut world, &k, "decode", 1);
    let states = retirement_states(&mut world, &k, t(200));
    assert!(
        !states.iter().flatten().any(|s| s == "Aborted"),
        "{states:?}"
    );
    assert_eq!(states.last(), Some(&None), "{states:?}");
    assert_eq!(role_status(&world, &k, "decode").ready, Some(1));
}

#[test]
fn a_restarted_member_aborts_the_retirement() {
    let (mut world, k) = serving(true, "vLLM");
    // Restarted before: refused at once.
    world.restart_member(&k, "server", 2, 0).unwrap();
    world.advance_to(t(130)).unwrap();
    set_replicas(&mut world, &k, "server", 2);
    world.step(t(131)).unwrap();
    let r = retirement(&world, &k).unwrap();
    assert_eq!(r.state, "Aborted");
    assert!(r.reason.unwrap().contains("restarted"));

    // Restarted while draining: aborted at the next pass.
    let (mut world, k) = serving(true, "vLLM");
    set_replicas(&mut world, &k, "server", 2);
    let states = retirement_states(&mut world, &k, t(65));
    assert_eq!(states.last().unwrap().as_deref(), Some("Draining"));
    world.restart_member(&k, "server", 2, 0).unwrap();
    world.step(t(66)).unwrap();
    assert_eq!(retirement(&world, &k).unwrap().state, "Aborted");
}

#[test]
fn a_member_still_busy_at_the_drain_deadline_aborts() {
    let mut world = world(0);
    let k = world
        .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 2, 1)]))
        .unwrap();
    // Long answers: a request stays in the batch for minutes, longer than the drain budget.
    let load = Load::new(2.0, 500.0, 8000.0, 0.0).unwrap();
    world
        .set_load(&k, "server", LoadProfile::constant(load).unwrap())
        .unwrap();
    world.advance_to(t(600)).unwrap();
    set_replicas(&mut world, &k, "server", 1);
    let states = retirement_states(&mut world, &k, t(1000));
    assert_eq!(
        states,
        some(&[
            "Admitted",
            "Disqualified",
            "Withdrawing",
            "Draining",
            "Aborted"
        ])
    );
    let r = retirement(&world, &k).unwrap();
    assert!(r.reason.unwrap().contains("busy"));
    // The drain phase started 4 s in; it expires at the overall deadline (300 s) first.
    let started = r.started_at.unwrap().0;
    let aborted_by = world
        .take_events()
        .iter()
        .find(|e| e.message.contains("aborted"))
        .unwrap()
        .at;
    assert_eq!(aborted_by, started + SignedDuration::from_secs(244));
}

#[test]
fn a_retry_token_restarts_an_aborted_retirement_once() {
    let (mut world, k) = serving(false, "vLLM");
    set_replicas(&mut world, &k, "server", 2);
    world.advance_to(t(100)).unwrap();
    assert!(retirement(&world, &k).unwrap().is_aborted());
    let annotate = |world: &mut World, value: &str| {
        let mut md = world.deployment(&k).unwrap().clone();
        md.metadata
            .annotations
            .get_or_insert_default()
            .insert(RETIREMENT_RETRY.into(), value.into());
        world.apply_deployment(md).unwrap();
    };
    annotate(&mut world, "server:1:t1");
    world.step(t(101)).unwrap();
    assert!(
        retirement(&world, &k).unwrap().is_aborted(),
        "wrong ordinal: ignored"
    );
    annotate(&mut world, "server:2:t1");
    world.step(t(102)).unwrap();
    let r = retirement(&world, &k).unwrap();
    assert_eq!(
        (r.state.as_str(), r.last_consumed_retry_token.as_deref()),
        ("Admitted", Some("t1"))
    );
    world.advance_to(t(140)).unwrap();
    assert!(
        retirement(&world, &k).unwrap().is_aborted(),
        "still no router"
    );
    world.step(t(141)).unwrap();
    assert!(
        retirement(&world, &k).unwrap().is_aborted(),
        "a replayed token is a no-op"
    );
}

#[test]
fn killing_the_target_aborts_and_releases_the_hold() {
    let (mut world, k) = serving(true, "vLLM");
    set_replicas(&mut world, &k, "server", 2);
    world.step(t(61)).unwrap();
    world.delete_pod(&k, "server", 2, 0).unwrap();
    let r = retirement(&world, &k).unwrap();
    assert_eq!(r.state, "Aborted");
    assert!(world.pods(&k).iter().all(|p| p.ordinal < 2));
    assert_eq!(world.quota_usage()["h100"].reserved, 2);
}

#[test]
fn a_larger_decrease_retires_one_ordinal_at_a_time() {
    let (mut world, k) = serving(true, "vLLM");
    set_replicas(&mut world, &k, "server", 1);
    let mut targets = Vec::new();
    for s in 61..400 {
        world.step(t(s)).unwrap();
        if let Some(r) = retirement(&world, &k)
            && targets.last() != Some(&r.replica_ordinal)
        {
            targets.push(r.replica_ordinal);
        }
        assert!(
            world.check_invariants().is_empty(),
            "{:?}",
            world.check_invariants()
        );
    }
    assert_eq!(targets, vec![2, 1]);
    assert_eq!(world.instances(&k).len(), 1);
}

#[test]
fn an_instance_never_admitted_is_still_aborted_without_a_router() {
    // The faithful reading of GPUStack: the removal runs the same steps whatever the
    // instance's admission, so without a router it ends Aborted and the held instance keeps
    // waiting for quota.
    let mut world = world(0);
    world.set_quota("h100", Some(1));
    let k = world
        .apply_deployment(target("chat", "vLLM", false, &[("server", "Server", 2, 1)]))
        .unwrap();
    world.advance_to(t(10)).unwrap();
    let waiting = world.instances(&k)[1].state;
    assert_eq!(
        waiting,
        mds_sim::InstanceState::Queued,
        "ordinal 1 waits for quota"
    );
    set_replicas(&mut world, &k, "server", 1);
    let states = retirement_states(&mut world, &k, t(60));
    assert_eq!(states, some(&["Admitted", "Aborted"]));
    assert_eq!(retirement(&world, &k).unwrap().replica_ordinal, 1);
    assert_eq!(world.instances(&k)[1].state, mds_sim::InstanceState::Queued);
}
