//! Builders for world tests: targets written as JSON the way a user writes them, and a clock.
#![allow(dead_code)]

use jiff::{SignedDuration, Timestamp};
use mds_api::target::{ModelDeployment, Retirement, TargetRoleStatus};
use mds_sim::{DeploymentKey, RoleSettings, World, WorldConfig};
use serde_json::{Value, json};

pub fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap() + SignedDuration::from_secs(seconds)
}

/// A role: (name, kind, replicas, size).
pub type RoleSpec<'a> = (&'a str, &'a str, i32, i32);

pub fn target(name: &str, engine: &str, router: bool, roles: &[RoleSpec]) -> ModelDeployment {
    let roles: Vec<Value> = roles
        .iter()
        .map(|(role, kind, replicas, size)| {
            json!({"name": role, "kind": kind, "replicas": replicas, "size": size, "instanceType": "h100"})
        })
        .collect();
    let mut spec = json!({"engine": {"name": engine}, "roles": roles});
    if router {
        spec["router"] = json!({"name": "vllm-router"});
    }
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": "serving"},
        "spec": spec,
    }))
    .unwrap()
}

pub fn key(name: &str) -> DeploymentKey {
    DeploymentKey::new("serving", name)
}

/// A world at `t(0)` with a cold start of `cold_start` seconds.
pub fn world(cold_start: i64) -> World {
    let config = WorldConfig {
        default_role: RoleSettings {
            cold_start: SignedDuration::from_secs(cold_start),
            ..RoleSettings::default()
        },
        ..WorldConfig::default()
    };
    World::new(config, t(0)).unwrap()
}

/// Sets a role's replicas through a new spec, as a scaler's patch would.
pub fn set_replicas(world: &mut World, key: &DeploymentKey, role: &str, replicas: i32) {
    let mut md = world.deployment(key).unwrap().clone();
    md.spec
        .roles
        .iter_mut()
        .find(|r| r.name == role)
        .unwrap()
        .replicas = Some(replicas);
    md.metadata.generation = None;
    world.apply_deployment(md).unwrap();
}

pub fn role_status(world: &World, key: &DeploymentKey, role: &str) -> TargetRoleStatus {
    world
        .deployment(key)
        .unwrap()
        .status
        .as_ref()
        .unwrap()
        .roles
        .iter()
        .find(|r| r.name == role)
        .unwrap()
        .clone()
}

pub fn retirement(world: &World, key: &DeploymentKey) -> Option<Retirement> {
    world.deployment(key)?.status.as_ref()?.retirement.clone()
}

pub fn condition(world: &World, key: &DeploymentKey, kind: &str) -> (String, String, String) {
    let c = world
        .deployment(key)
        .unwrap()
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.condition_type == kind)
        .unwrap()
        .clone();
    (
        c.status,
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    )
}

/// Steps one second at a time from the world's time to `until`, recording each distinct
/// retirement state in order (`None` when the field is absent).
pub fn retirement_states(
    world: &mut World,
    key: &DeploymentKey,
    until: Timestamp,
) -> Vec<Option<String>> {
    let mut seen: Vec<Option<String>> = Vec::new();
    while world.now() < until {
        let next = world.now() + SignedDuration::from_secs(1);
        world.step(next).unwrap();
        let state = retirement(world, key).map(|r| r.state);
        if seen.last() != Some(&state) {
            seen.push(state);
        }
    }
    seen
}
