//! The engines' pages as the worker's `MetricsSource` reads them: rendered by the world at the
//! pass's moment, looked up by the Pod address in the URL the sampler built.

use std::collections::BTreeMap;

use mds_sim::{DeploymentKey, World};
use mds_worker::{MetricsSource, ScrapeError};

/// Every answering Pod by its IP; a page is rendered when the sampler fetches it.
pub(crate) struct Pages<'w> {
    world: &'w World,
    namespace: String,
    pods: BTreeMap<String, PagePod>,
}

/// The Pod behind an address: its name, role and ordinal.
#[derive(Clone, Debug)]
pub(crate) struct PagePod {
    pub name: String,
    pub role: String,
    pub ordinal: u32,
}

impl<'w> Pages<'w> {
    pub(crate) fn of(world: &'w World, key: &DeploymentKey) -> Pages<'w> {
        let pods = world
            .metrics_endpoints(key)
            .into_iter()
            .map(|(ip, name, role, ordinal)| {
                let pod = PagePod {
                    name,
                    role,
                    ordinal,
                };
                (ip, pod)
            })
            .collect();
        Pages {
            world,
            namespace: key.namespace.clone(),
            pods,
        }
    }

    /// The Pod the sampler's URL names.
    pub(crate) fn pod(&self, url: &str) -> Option<&PagePod> {
        host(url).and_then(|h| self.pods.get(h))
    }
}

/// The host of `http://HOST:PORT/PATH`.
fn host(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    Some(authority.rsplit_once(':').map_or(authority, |(h, _)| h))
}

impl MetricsSource for Pages<'_> {
    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        self.pod(url)
            .and_then(|pod| self.world.metrics_page(&self.namespace, &pod.name))
            .ok_or_else(|| ScrapeError::Connect(format!("nothing answers at {url}")))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_host_is_read_from_the_samplers_url() {
        assert_eq!(
            super::host("http://127.0.0.7:8000/metrics"),
            Some("127.0.0.7")
        );
        assert_eq!(super::host("http://127.0.0.7/metrics"), Some("127.0.0.7"));
        assert_eq!(super::host("garbage"), None);
    }
}
