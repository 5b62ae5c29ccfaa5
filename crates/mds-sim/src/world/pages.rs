//! The engines' `/metrics` pages: found by Pod name or address slot, rendered from the
//! engine state (an external-load-balance member serves its share of the instance's work),
//! optionally after serving the load offered up to the moment of the scrape.

use jiff::Timestamp;
use mds_api::target::LoadBalance;

use super::deployment::Deployment;
use super::{DeploymentKey, World, WorldConfig, instance, serving, views};
use crate::engine::EngineState;
use crate::exposition::{PageContext, render};

impl World {
    /// The `/metrics` page of a Pod, or `None` when it does not answer.
    pub fn metrics_page(&self, namespace: &str, pod_name: &str) -> Option<String> {
        self.find_member(|dep, m| dep.key.namespace == namespace && m.name == pod_name)
            .map(|source| source.render())
    }

    /// The `/metrics` page served at an address slot (see [`PodView::ip_slot`]).
    pub fn metrics_page_at_slot(&self, slot: u32) -> Option<String> {
        self.find_member(|_, m| m.ip_slot == slot)
            .map(|source| source.render())
    }

    /// The page at an address slot as of `now`: the engines of that Pod's deployment serve the
    /// load offered up to `now` first (as the next step would have them do), the rest of the
    /// world stays where it is. A server answering scrapes between steps gives exact counters
    /// this way at the cost of one deployment, not of a step of every one. A `now` before what
    /// was served already changes nothing.
    pub fn metrics_page_at_slot_as_of(&mut self, slot: u32, now: Timestamp) -> Option<String> {
        let key = self.deployments.iter().find_map(|(key, dep)| {
            dep.instances()
                .any(|(_, i)| i.members.iter().any(|m| m.ip_slot == slot))
                .then(|| key.clone())
        })?;
        self.page_source_as_of(&key, slot, now)
            .map(|source| source.render())
    }

    /// What the page at an address slot of deployment `key` is rendered from, as of `now`
    /// (see [`World::metrics_page_at_slot_as_of`]). A slot belongs to one Pod for good, so a
    /// server that knows a slot's deployment looks up that deployment only, and renders the
    /// page with [`PageSource::render`] without holding the world. `None` when the
    /// deployment has no Pod at `slot` any more or its Pod does not answer.
    pub fn page_source_as_of(
        &mut self,
        key: &DeploymentKey,
        slot: u32,
        now: Timestamp,
    ) -> Option<PageSource> {
        let dep = self.deployments.get_mut(key)?;
        if !dep
            .instances()
            .any(|(_, i)| i.members.iter().any(|m| m.ip_slot == slot))
        {
            return None;
        }
        serving::serve(dep, now, &self.config);
        member_source(dep, &self.config, |m| m.ip_slot == slot)?
    }

    fn find_member(
        &self,
        wanted: impl Fn(&Deployment, &instance::Member) -> bool,
    ) -> Option<PageSource> {
        for dep in self.deployments.values() {
            if let Some(found) = member_source(dep, &self.config, |m| wanted(dep, m)) {
                return found;
            }
        }
        None
    }
}

/// What one Pod's `/metrics` page is rendered from, taken out of the world.
#[derive(Clone, Debug)]
pub struct PageSource {
    engine: EngineState,
    model_name: String,
}

impl PageSource {
    /// The page text.
    pub fn render(&self) -> String {
        render(
            &self.engine,
            &PageContext {
                model_name: &self.model_name,
            },
        )
    }
}

/// The page source of the first member of `dep` that `wanted` picks: `None` when it picks
/// none, `Some(None)` when the member it picks does not answer.
fn member_source(
    dep: &Deployment,
    config: &WorldConfig,
    wanted: impl Fn(&instance::Member) -> bool,
) -> Option<Option<PageSource>> {
    for (role, i) in dep.instances() {
        for m in &i.members {
            if !wanted(m) {
                continue;
            }
            let view = views::pod_view(dep, role, i, m, config);
            let Some(engine) = i.engine.as_ref().filter(|_| view.serves_metrics) else {
                return Some(None);
            };
            let engine = if i.shape.load_balance == LoadBalance::External {
                // Each member serves its share of the instance's work.
                engine.member_share(m.index, i.shape.size)
            } else {
                engine.clone()
            };
            let model_name = dep.object.metadata.name.clone().unwrap_or_default();
            return Some(Some(PageSource { engine, model_name }));
        }
    }
    None
}
