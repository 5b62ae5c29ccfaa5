//! The engines' `/metrics` pages: found by Pod name or address slot, rendered from the
//! engine state (an external-load-balance member serves its share of the instance's work),
//! optionally after serving the load offered up to the moment of the scrape.

use jiff::Timestamp;
use mds_api::target::LoadBalance;

use super::deployment::Deployment;
use super::{DeploymentKey, World, instance, serving, views};
use crate::engine::EngineState;
use crate::exposition::{PageContext, render};

impl World {
    /// The `/metrics` page of a Pod, or `None` when it does not answer.
    pub fn metrics_page(&self, namespace: &str, pod_name: &str) -> Option<String> {
        self.find_member(
            |dep, m| dep.key.namespace == namespace && m.name == pod_name,
            render_page,
        )
    }

    /// The `/metrics` page served at an address slot (see [`PodView::ip_slot`]).
    pub fn metrics_page_at_slot(&self, slot: u32) -> Option<String> {
        self.find_member(|_, m| m.ip_slot == slot, render_page)
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
        member_engine(
            dep,
            |m| m.ip_slot == slot,
            |engine, model_name| PageSource {
                engine: engine.clone(),
                model_name: model_name.to_string(),
            },
        )?
    }

    /// `page` of the engine of the first member `wanted` picks, when that member answers.
    fn find_member<R>(
        &self,
        wanted: impl Fn(&Deployment, &instance::Member) -> bool,
        page: impl FnOnce(&EngineState, &str) -> R,
    ) -> Option<R> {
        let mut page = Some(page);
        for dep in self.deployments.values() {
            let found = member_engine(
                dep,
                |m| wanted(dep, m),
                |engine, model_name| page.take().map(|page| page(engine, model_name)),
            );
            if let Some(found) = found {
                return found.flatten();
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
        render_page(&self.engine, &self.model_name)
    }
}

fn render_page(engine: &EngineState, model_name: &str) -> String {
    render(engine, &PageContext { model_name })
}

/// `page` of the engine of the first member of `dep` that `wanted` picks (its share of the
/// instance's work under External load balancing) and the model name: `None` when `wanted`
/// picks none, `Some(None)` when the member it picks does not answer. Borrowed, so a scrape
/// copies no engine state unless the member serves a share.
fn member_engine<R>(
    dep: &Deployment,
    wanted: impl Fn(&instance::Member) -> bool,
    page: impl FnOnce(&EngineState, &str) -> R,
) -> Option<Option<R>> {
    for (_, i) in dep.instances() {
        for m in &i.members {
            if !wanted(m) {
                continue;
            }
            let Some(engine) = i.engine.as_ref().filter(|_| views::serves_metrics(i, m)) else {
                return Some(None);
            };
            let model_name = dep.object.metadata.name.as_deref().unwrap_or_default();
            return Some(Some(if i.shape.load_balance == LoadBalance::External {
                page(&engine.member_share(m.index, i.shape.size), model_name)
            } else {
                page(engine, model_name)
            }));
        }
    }
    None
}
