//! A page served from its deployment alone: `World::page_source_as_of` finds a Pod's page by
//! its deployment and address slot, without a scan of the world, and renders outside it the
//! page `metrics_page_at_slot_as_of` gives.

use crate::common;

use common::*;
use jiff::SignedDuration;
use mds_sim::World;

fn two_deployments() -> (World, Vec<mds_sim::DeploymentKey>) {
    let load = mds_sim::LoadProfile::constant(mds_sim::Load::new(4.0, 1000.0, 200.0, 0.0).unwrap())
        .unwrap();
    let mut world = world(1);
    let mut keys = Vec::new();
    for name in ["a", "b"] {
        let k = world
            .apply_deployment(target(name, "vLLM", true, &[("server", "Server", 2, 1)]))
            .unwrap();
        world.set_load(&k, "server", load.clone()).unwrap();
        keys.push(k);
    }
    world.advance_to(t(10)).unwrap();
    (world, keys)
}

#[test]
fn a_page_source_renders_the_page_the_slot_serves() {
    let (mut world, keys) = two_deployments();
    let at = t(10) + SignedDuration::from_millis(500);
    for k in &keys {
        for pod in world.pods(k) {
            let mut scanned = world.clone();
            let expected = scanned.metrics_page_at_slot_as_of(pod.ip_slot, at);
            assert!(
                expected.is_some(),
                "{} answers",
                pod.metadata.name.as_deref().unwrap()
            );
            let source = world.page_source_as_of(k, pod.ip_slot, at);
            assert_eq!(source.map(|s| s.render()), expected);
        }
    }
}

#[test]
fn a_slot_of_another_deployment_has_no_page_there_and_serves_nothing() {
    let (mut world, keys) = two_deployments();
    let slot_of_a = world.pods(&keys[0])[0].ip_slot;
    let slot_of_b = world.pods(&keys[1])[0].ip_slot;
    let b_before = world.metrics_page_at_slot(slot_of_b);
    let later = t(12);
    assert!(
        world
            .page_source_as_of(&keys[1], slot_of_a, later)
            .is_none()
    );
    assert!(
        world
            .page_source_as_of(
                &mds_sim::DeploymentKey::new("serving", "gone"),
                slot_of_a,
                later
            )
            .is_none()
    );
    assert_eq!(
        world.metrics_page_at_slot(slot_of_b),
        b_before,
        "b was not brought forward by a lookup that is not its own"
    );
}
