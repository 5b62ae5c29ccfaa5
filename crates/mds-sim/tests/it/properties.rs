//! Invariants over arbitrary sequences of spec edits, quota changes, faults and time: no panic,
//! contiguous ordinals, `ready` above `desired` only where TARGET.md allows it, no admission
//! beyond quota, status echoing the spec, and the same inputs giving the same world.

use crate::common;

use common::*;
use jiff::SignedDuration;
use mds_api::target::annotation_keys::RETIREMENT_RETRY;
use mds_sim::{Load, LoadProfile, World, WorldConfig};
use proptest::prelude::*;

const ROLES: [&str; 2] = ["server", "decode"];

#[derive(Clone, Debug)]
enum Op {
    Replicas(usize, i32),
    Quota(Option<u32>),
    Advance(i64),
    Evict(usize, u32),
    Restart(usize, u32, u32),
    DeletePod(usize, u32, u32),
    Park(usize, u32),
    Activate(usize, u32),
    Retry(usize, u32, u8),
    Offer(usize, f64),
}

fn op() -> impl Strategy<Value = Op> {
    let role = 0..ROLES.len();
    prop_oneof![
        3 => (role.clone(), -1..6i32).prop_map(|(r, n)| Op::Replicas(r, n)),
        1 => proptest::option::of(0..8u32).prop_map(Op::Quota),
        4 => (0..90i64).prop_map(Op::Advance),
        1 => (role.clone(), 0..5u32).prop_map(|(r, o)| Op::Evict(r, o)),
        1 => (role.clone(), 0..5u32, 0..3u32).prop_map(|(r, o, m)| Op::Restart(r, o, m)),
        1 => (role.clone(), 0..5u32, 0..3u32).prop_map(|(r, o, m)| Op::DeletePod(r, o, m)),
        1 => (role.clone(), 0..5u32).prop_map(|(r, o)| Op::Park(r, o)),
        1 => (role.clone(), 0..5u32).prop_map(|(r, o)| Op::Activate(r, o)),
        1 => (role.clone(), 0..5u32, 0..3u8).prop_map(|(r, o, tok)| Op::Retry(r, o, tok)),
        1 => (role, 0.0..30.0f64).prop_map(|(r, rps)| Op::Offer(r, rps)),
    ]
}

fn new_world(router: bool, engine: &str) -> (World, mds_sim::DeploymentKey) {
    let config = WorldConfig {
        park_after: Some(SignedDuration::from_secs(200)),
        ..WorldConfig::default()
    };
    let mut world = World::new(config, t(0)).unwrap();
    world.set_quota("h100", Some(4));
    let md = target(
        "llm",
        engine,
        router,
        &[("server", "Server", 2, 1), ("decode", "Decode", 1, 2)],
    );
    let k = world.apply_deployment(md).unwrap();
    (world, k)
}

/// Applies one op; faults may be refused (that is an answer, not a failure).
fn apply(world: &mut World, k: &mds_sim::DeploymentKey, op: &Op) {
    let now = world.now();
    let _ = match *op {
        Op::Replicas(r, n) => {
            set_replicas(world, k, ROLES[r], n);
            Ok(())
        }
        Op::Quota(q) => {
            world.set_quota("h100", q);
            Ok(())
        }
        Op::Advance(s) => world.advance_to(now + SignedDuration::from_secs(s)),
        Op::Evict(r, o) => world.evict(k, ROLES[r], o),
        Op::Restart(r, o, m) => world.restart_member(k, ROLES[r], o, m),
        Op::DeletePod(r, o, m) => world.delete_pod(k, ROLES[r], o, m),
        Op::Park(r, o) => world.park(k, ROLES[r], o),
        Op::Activate(r, o) => world.activate(k, ROLES[r], o),
        Op::Retry(r, o, tok) => {
            let mut md = world.deployment(k).unwrap().clone();
            md.metadata.annotations.get_or_insert_default().insert(
                RETIREMENT_RETRY.into(),
                format!("{}:{o}:tok{tok}", ROLES[r]),
            );
            world.apply_deployment(md).map(|_| ())
        }
        Op::Offer(r, rps) => {
            let load = Load::new(rps, 1200.0, 250.0, 0.3).unwrap();
            world.set_load(k, ROLES[r], LoadProfile::constant(load).unwrap())
        }
    };
}

fn snapshot(world: &World, k: &mds_sim::DeploymentKey) -> String {
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}",
        world.deployment(k),
        world.pods(k),
        world.workloads(k),
        world.instances(k)
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_over_any_sequence(ops in prop::collection::vec(op(), 1..40), router: bool, sglang: bool) {
        let (mut world, k) = new_world(router, if sglang { "SGLang" } else { "vLLM" });
        for op in &ops {
            let before = world.quota_usage().get("h100").map_or(0, |u| u.reserved);
            apply(&mut world, &k, op);
            let broken = world.check_invariants();
            prop_assert!(broken.is_empty(), "after {:?}: {:?}", op, broken);
            let usage = world.quota_usage().get("h100").copied();
            if let Some(usage) = usage && let Some(quota) = usage.quota {
                prop_assert!(usage.reserved <= quota.max(before),
                    "after {:?}: {} GPUs reserved against a quota of {} (held {} before)", op, usage.reserved, quota, before);
            }
            if matches!(op, Op::Advance(_)) {
                let md = world.deployment(&k).unwrap();
                for (role, status) in md.spec.roles.iter().zip(&md.status.as_ref().unwrap().roles) {
                    prop_assert_eq!(status.desired, Some(role.replicas()));
                }
            }
        }
        // The endpoints a scraper finds are the Pods that serve metrics, with their address.
        let endpoints: Vec<_> = world
            .pods(&k)
            .into_iter()
            .filter(|p| p.serves_metrics)
            .map(|p| (p.pod_ip.unwrap(), p.metadata.name.unwrap(), p.role, p.ordinal))
            .collect();
        prop_assert_eq!(world.metrics_endpoints(&k), endpoints);
        // Every page a Pod serves parses cleanly.
        for pod in world.pods(&k).iter().filter(|p| p.serves_metrics) {
            let page = world.metrics_page("serving", pod.metadata.name.as_deref().unwrap()).unwrap();
            prop_assert!(mds_signals::exposition::parse(&page).skipped.is_empty());
        }
    }

    #[test]
    fn the_same_inputs_give_the_same_world(ops in prop::collection::vec(op(), 1..30), router: bool) {
        let run = || {
            let (mut world, k) = new_world(router, "vLLM");
            for op in &ops {
                apply(&mut world, &k, op);
            }
            (snapshot(&world, &k), world.take_events())
        };
        prop_assert_eq!(run(), run());
    }
}

/// [`World::advance_to`] with each step running the whole lifecycle pass.
fn advance_every_part(world: &mut World, to: jiff::Timestamp) {
    let tick = world.config().tick;
    loop {
        let next = world.now() + tick;
        if next >= to {
            return world.step_every_part(to).unwrap();
        }
        world.step_every_part(next).unwrap();
    }
}

/// Everything a reader of the world sees: objects, statuses, events and every page.
fn observed(world: &mut World, k: &mds_sim::DeploymentKey) -> String {
    let pages: Vec<Option<String>> = world
        .pods(k)
        .iter()
        .map(|p| world.metrics_page("serving", p.metadata.name.as_deref().unwrap()))
        .collect();
    format!(
        "{}\n{:?}\n{:?}\n{:?}",
        snapshot(world, k),
        world.take_events(),
        pages,
        world.quota_usage()
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Steps skip the lifecycle pass while nothing is due (the next-event world); a world
    /// that runs it at every step is the oracle: both must be the same after every input.
    #[test]
    fn skipping_settled_passes_changes_nothing(ops in prop::collection::vec(op(), 1..40), router: bool) {
        let (mut skipping, k) = new_world(router, "vLLM");
        let (mut every, _) = new_world(router, "vLLM");
        for op in &ops {
            apply(&mut skipping, &k, op);
            match *op {
                Op::Advance(s) => {
                    let to = every.now() + SignedDuration::from_secs(s);
                    advance_every_part(&mut every, to);
                }
                _ => apply(&mut every, &k, op),
            }
            prop_assert_eq!(observed(&mut skipping, &k), observed(&mut every, &k), "after {:?}", op);
        }
    }
}
