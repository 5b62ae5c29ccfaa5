//! ModelDeployments into the world. kube's watcher relists after a restart (an expired
//! resourceVersion, a dropped connection) with backoff; the relist removes from the world what
//! vanished meanwhile, so no deletion is missed.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use mds_api::resources::TargetApiVersion;
use mds_api::target::ModelDeployment;
use mds_sim::DeploymentKey;
use tokio::sync::watch as channel;

use super::{Shared, State};

pub(crate) async fn run(client: Client, shared: Arc<Shared>, listed: channel::Sender<bool>) {
    // v1alpha1 is the stored version; v1 serves the same objects.
    let version = TargetApiVersion::V1Alpha1;
    let api: Api<ModelDeployment> = match &shared.namespace {
        Some(namespace) => Api::namespaced_with(client, namespace, &version),
        None => Api::all_with(client, &version),
    };
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relisted: Option<BTreeSet<DeploymentKey>> = None;
    while let Some(event) = events.next().await {
        {
            let mut state = shared.lock();
            match event {
                Ok(Event::Init) => relisted = Some(BTreeSet::new()),
                Ok(Event::InitApply(md)) => {
                    if let Some(key) = apply(&mut state, md) {
                        relisted.get_or_insert_default().insert(key);
                    }
                }
                Ok(Event::InitDone) => {
                    let seen = relisted.take().unwrap_or_default();
                    for key in state.world.deployment_keys() {
                        if !seen.contains(&key) {
                            let _ = state.world.remove_deployment(&key);
                        }
                    }
                    listed.send_replace(true);
                }
                Ok(Event::Apply(md)) => {
                    apply(&mut state, md);
                }
                Ok(Event::Delete(md)) => remove(&mut state, &md),
                Err(e) => state.error(format!("watching ModelDeployments: {e}")),
            }
            state.resolve_rules();
        }
        shared.wake.notify_one();
    }
}

/// Applies one ModelDeployment as the API server holds it (its UID and generation included).
fn apply(state: &mut State, md: ModelDeployment) -> Option<DeploymentKey> {
    let name = format!("{}/{}", md.namespace().unwrap_or_default(), md.name_any());
    // Act on it at the time it arrived, not at the world's last step.
    state.catch_up();
    match state.world.apply_deployment(md) {
        Ok(key) => Some(key),
        Err(e) => {
            state.error(format!("ModelDeployment {name} is not mirrored: {e}"));
            None
        }
    }
}

/// Removes a deleted ModelDeployment, unless the world already holds a newer one of that name.
fn remove(state: &mut State, md: &ModelDeployment) {
    let key = DeploymentKey::new(&md.namespace().unwrap_or_default(), &md.name_any());
    let same = state
        .world
        .deployment(&key)
        .is_some_and(|held| held.metadata.uid == md.metadata.uid);
    if same {
        state.catch_up();
        let _ = state.world.remove_deployment(&key);
    }
}
