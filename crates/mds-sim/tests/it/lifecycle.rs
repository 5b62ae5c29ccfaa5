//! Instances through their life: Kueue admission under quota, cold start, parking, eviction,
//! and the status the stand-in writes.

use crate::common;

use common::*;
use mds_api::target::WorkloadAdmission;
use mds_sim::{InstanceState, World, WorldConfig, WorldError};

fn states(world: &World, name: &str) -> Vec<InstanceState> {
    world
        .instances(&key(name))
        .iter()
        .map(|i| i.state)
        .collect()
}

#[test]
fn quota_of_two_gpus_holds_a_third_instance_pending_until_quota_frees() {
    let mut world = world(30);
    world.set_quota("h100", Some(2));
    let k = world
        .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 3, 1)]))
        .unwrap();
    world.step(t(1)).unwrap();
    use InstanceState::*;
    assert_eq!(states(&world, "chat"), vec![Starting, Starting, Queued]);
    let s = role_status(&world, &k, "server");
    assert_eq!(
        (s.desired, s.ready, s.quota_reserved),
        (Some(3), Some(0), Some(2))
    );
    assert_eq!(condition(&world, &k, "QuotaReserved").1, "Pending");
    let admissions: Vec<WorkloadAdmission> =
        world.workloads(&k).iter().map(|w| w.admission()).collect();
    assert_eq!(
        admissions,
        vec![
            WorkloadAdmission::Admitted,
            WorkloadAdmission::Admitted,
            WorkloadAdmission::Unadmitted
        ]
    );
    assert_eq!(world.quota_usage()["h100"].reserved, 2);

    // Still pending a minute later: nothing frees quota by itself.
    world.advance_to(t(60)).unwrap();
    assert_eq!(states(&world, "chat"), vec![Ready, Ready, Queued]);
    assert_eq!(role_status(&world, &k, "server").ready, Some(2));
    assert_eq!(
        world
            .deployment(&k)
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .phase
            .as_deref(),
        Some("Starting")
    );

    world.set_quota("h100", Some(3));
    world.step(t(61)).unwrap();
    assert_eq!(states(&world, "chat"), vec![Ready, Ready, Starting]);
    assert_eq!(condition(&world, &k, "QuotaReserved").1, "Reserved");
    world.advance_to(t(91)).unwrap();
    assert_eq!(role_status(&world, &k, "server").ready, Some(3));
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
fn quota_freed_by_another_deployment_admits_in_creation_order() {
    let mut world = world(0);
    world.set_quota("h100", Some(2));
    let a = world
        .apply_deployment(target("a", "vLLM", true, &[("server", "Server", 2, 1)]))
        .unwrap();
    world.step(t(1)).unwrap();
    let b = world
        .apply_deployment(target("b", "vLLM", true, &[("server", "Server", 1, 1)]))
        .unwrap();
    let c = world
        .apply_deployment(target("c", "vLLM", true, &[("server", "Server", 1, 1)]))
        .unwrap();
    world.step(t(2)).unwrap();
    assert_eq!(states(&world, "b"), vec![InstanceState::Queued]);
    assert_eq!(states(&world, "c"), vec![InstanceState::Queued]);
    world.remove_deployment(&a).unwrap();
    world.step(t(3)).unwrap();
    assert_eq!(states(&world, "b"), vec![InstanceState::Ready]);
    assert_eq!(states(&world, "c"), vec![InstanceState::Ready]);
    assert!(world.instances(&b)[0].gpus == 1 && world.instances(&c)[0].gpus == 1);
}

#[test]
fn an_instance_is_ready_exactly_one_cold_start_after_admission() {
    let mut world = world(45);
    let k = world
        .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 1, 1)]))
        .unwrap();
    world.step(t(10)).unwrap();
    let pod = &world.pods(&k)[0];
    assert!(pod.pod_ip.is_some() && !pod.ready && !pod.scheduling_gated);
    let name = pod.metadata.name.clone().unwrap();
    world.advance_to(t(54)).unwrap();
    assert!(!world.pods(&k)[0].ready, "44 s after admission");
    assert!(
        world.metrics_page("serving", &name).is_none(),
        "a loading engine does not answer"
    );
    world.step(t(55)).unwrap();
    assert!(world.pods(&k)[0].ready, "45 s after admission");
    assert!(world.metrics_page("serving", &name).is_some());
}

#[test]
fn a_workload_waiting_thirty_minutes_is_parked_and_can_be_reactivated() {
    let mut world = world(0);
    world.set_quota("h100", Some(0));
    let k = world
        .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 1, 1)]))
        .unwrap();
    // The first pass, at t(1), creates the Workload; it waits from then on.
    world.advance_to(t(30 * 60)).unwrap();
    assert_eq!(
        world.workloads(&k)[0].admission(),
        WorkloadAdmission::Unadmitted
    );
    world.step(t(30 * 60 + 1)).unwrap();
    let wl = &world.workloads(&k)[0];
    assert_eq!(wl.spec.active, Some(false));
    assert_eq!(wl.admission(), WorkloadAdmission::Parked);
    let (status, reason, message) = condition(&world, &k, "QuotaReserved");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Parked"));
    assert!(message.contains("parked rather than held"), "{message}");
    assert_eq!(
        world
            .deployment(&k)
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .phase
            .as_deref(),
        Some("Degraded")
    );

    // Freeing quota does not unpark; reactivating does.
    world.set_quota("h100", Some(1));
    world.step(t(30 * 60 + 2)).unwrap();
    assert_eq!(states(&world, "chat"), vec![InstanceState::Parked]);
    world.activate(&k, "server", 0).unwrap();
    world.step(t(30 * 60 + 3)).unwrap();
    assert_eq!(states(&world, "chat"), vec![InstanceState::Ready]);
}

#[test]
fn an_evicted_instance_loses_quota_and_pods_and_queues_again() {
    let mut world = world(10);
    world.set_quota("h100", Some(1));
    let k = world
        .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 1, 1)]))
        .unwrap();
    world.advance_to(t(20)).unwrap();
    let before = world.pods(&k)[0].metadata.uid.clone();
    // Someone else takes the GPU first: the quota is lowered, then the instance is evicted.
    world.set_quota("h100", Some(0));
    world.evict(&k, "server", 0).unwrap();
    let wl = &world.workloads(&k)[0];
    assert_eq!(wl.admission(), WorkloadAdmission::Unadmitted);
    assert!(
        wl.status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.condition_type == "Evicted" && c.status == "True")
    );
    let pod = &world.pods(&k)[0];
    assert_ne!(pod.metadata.uid, before, "the Pod is replaced");
    assert!(pod.scheduling_gated && !pod.ready);
    assert_eq!(condition(&world, &k, "QuotaReserved").1, "PreemptedInPart");
    world.set_quota("h100", Some(1));
    world.advance_to(t(31)).unwrap();
    assert_eq!(states(&world, "chat"), vec![InstanceState::Ready]);
    assert_eq!(
        world.workloads(&k)[0].admission(),
        WorkloadAdmission::Admitted
    );
    assert_eq!(
        world.evict(&k, "server", 3),
        Err(WorldError::NoInstance {
            deployment: k.clone(),
            role: "server".into(),
            ordinal: 3
        })
    );
}

#[test]
fn scale_up_adds_ordinals_and_desired_echoes_the_spec() {
    let mut world = world(0);
    let k = world
        .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 1, 1)]))
        .unwrap();
    world.step(t(1)).unwrap();
    set_replicas(&mut world, &k, "server", 4);
    assert_eq!(world.deployment(&k).unwrap().metadata.generation, Some(2));
    world.step(t(2)).unwrap();
    let ordinals: Vec<u32> = world.instances(&k).iter().map(|i| i.ordinal).collect();
    assert_eq!(ordinals, vec![0, 1, 2, 3]);
    let s = role_status(&world, &k, "server");
    assert_eq!((s.desired, s.ready), (Some(4), Some(4)));
}

#[test]
fn generation_follows_the_api_server() {
    let mut world = world(0);
    let md = target("chat", "vLLM", true, &[("server", "Server", 1, 1)]);
    let k = world.apply_deployment(md.clone()).unwrap();
    assert_eq!(world.deployment(&k).unwrap().metadata.generation, Some(1));
    world.apply_deployment(md.clone()).unwrap();
    assert_eq!(
        world.deployment(&k).unwrap().metadata.generation,
        Some(1),
        "same spec"
    );
    let mut mirrored = md;
    mirrored.metadata.generation = Some(7);
    world.apply_deployment(mirrored).unwrap();
    assert_eq!(
        world.deployment(&k).unwrap().metadata.generation,
        Some(7),
        "the server's value"
    );
}

#[test]
fn bad_inputs_are_errors_naming_the_rule() {
    let mut world = world(0);
    world.step(t(10)).unwrap();
    let err = world.step(t(5)).unwrap_err();
    assert!(matches!(err, WorldError::TimeWentBackwards { .. }), "{err}");
    let twice = target(
        "x",
        "vLLM",
        true,
        &[("a", "Server", 1, 1), ("a", "Decode", 1, 1)],
    );
    let err = world.apply_deployment(twice).unwrap_err().to_string();
    assert!(err.contains("spec.roles[1].name"), "{err}");
    let mut nameless = target("x", "vLLM", true, &[]);
    nameless.metadata.name = None;
    assert!(
        world
            .apply_deployment(nameless)
            .unwrap_err()
            .to_string()
            .contains("metadata.name")
    );
    let config = WorldConfig {
        tick: jiff::SignedDuration::ZERO,
        ..WorldConfig::default()
    };
    assert!(
        World::new(config, t(0))
            .unwrap_err()
            .to_string()
            .contains("tick")
    );
}

#[test]
fn an_outside_engine_turns_a_starting_instance_ready_at_once_and_nothing_else() {
    // A day-long cold start: readiness comes only from the engine (a real process in the lab).
    let mut world = world(86_400);
    world.set_quota("h100", Some(1));
    let k = world
        .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 2, 1)]))
        .unwrap();
    world.step(t(1)).unwrap();
    use InstanceState::*;
    assert_eq!(states(&world, "chat"), vec![Starting, Queued]);
    assert_eq!(world.engine_ready(&k, "server", 0), Ok(true));
    assert_eq!(states(&world, "chat"), vec![Ready, Queued]);
    assert_eq!(role_status(&world, &k, "server").ready, Some(1));
    assert!(
        world
            .take_events()
            .iter()
            .any(|e| e.message == "server ordinal 0 ready")
    );
    // Ready already, or not admitted: no change.
    assert_eq!(world.engine_ready(&k, "server", 0), Ok(false));
    assert_eq!(world.engine_ready(&k, "server", 1), Ok(false));
    assert_eq!(states(&world, "chat"), vec![Ready, Queued]);
    assert!(matches!(
        world.engine_ready(&k, "server", 7),
        Err(WorldError::NoInstance { .. })
    ));
}
