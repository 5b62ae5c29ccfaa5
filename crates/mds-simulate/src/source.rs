//! The engines' pages as the worker's `MetricsSource` reads them: rendered by the world at the
//! pass's moment, looked up by the Pod address in the URL the sampler built.

use std::collections::BTreeMap;

use mds_sim::{DeploymentKey, World};
use mds_worker::{MetricsSource, ScrapeError};

/// Every answering Pod by its IP; a page is rendered when the sampler fetches it.
pub(crate) struct Pages<'w> {
    world: &'w World,
    namespace: String,
    pods: BTreeMap<String, String>,
}

impl<'w> Pages<'w> {
    pub(crate) fn of(world: &'w World, key: &DeploymentKey) -> Pages<'w> {
        let pods = world
            .pods(key)
            .into_iter()
            .filter(|p| p.serves_metrics)
            .filter_map(|p| Some((p.pod_ip.clone()?, p.metadata.name.clone()?)))
            .collect();
        Pages {
            world,
            namespace: key.namespace.clone(),
            pods,
        }
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
        host(url)
            .and_then(|h| self.pods.get(h))
            .and_then(|name| self.world.metrics_page(&self.namespace, name))
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
