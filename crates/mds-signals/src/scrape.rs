//! Which Pods of a role are scraped, and where (D6, TARGET.md §4).
//!
//! Ready Pods of the role, leader members only (`member-index` 0 or absent) unless a Pod
//! says `prometheus.io/scrape: "true"`; address from `prometheus.io/{scheme,port,path}`
//! defaulting to `http`, `8000` and `/metrics`; at most [`MAX_SAMPLED_PODS`] Pods, lowest
//! ordinals first. More eligible Pods than that leave coverage incomplete.

use crate::observation::MAX_SAMPLED_PODS;

/// The largest /metrics body read (spec: scraping is bounded in size and time). Engine pages
/// run to a few hundred KiB; a larger body is refused, never parsed in part.
pub const MAX_PAGE_BYTES: u64 = 16 * 1024 * 1024;

/// What the sampler knows of one Pod of the role (read from its labels, annotations and
/// status by the shell).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PodFacts {
    pub uid: String,
    /// `modeldeployment.gpustack.ai/pod-ordinal`.
    pub ordinal: Option<u32>,
    /// `modeldeployment.gpustack.ai/member-index`; absent means member 0.
    pub member_index: Option<u32>,
    /// `Ready=True` and not being deleted.
    pub ready: bool,
    pub pod_ip: Option<String>,
    /// `prometheus.io/scrape`.
    pub scrape_annotation: Option<String>,
    /// `prometheus.io/scheme`.
    pub scheme_annotation: Option<String>,
    /// `prometheus.io/port`.
    pub port_annotation: Option<String>,
    /// `prometheus.io/path`.
    pub path_annotation: Option<String>,
}

/// One Pod to scrape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScrapeTarget {
    pub uid: String,
    pub url: String,
}

/// The Pods to scrape this pass.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ScrapePlan {
    /// At most [`MAX_SAMPLED_PODS`], lowest ordinals first.
    pub targets: Vec<ScrapeTarget>,
    /// Ready, eligible Pods, including those past the cap: the count role totals are
    /// estimated for (D9).
    pub eligible_ready: u32,
    /// More eligible Pods than the cap: coverage is incomplete and scale-down is held.
    pub capped: bool,
    /// Eligible Pods left out because an annotation is unusable, with the reason.
    pub unusable: Vec<(String, String)>,
}

fn is_scrape_opt_in(pod: &PodFacts) -> bool {
    pod.scrape_annotation.as_deref() == Some("true")
}

/// Chooses the Pods to scrape (D6).
pub fn plan(pods: &[PodFacts]) -> ScrapePlan {
    let mut eligible: Vec<&PodFacts> = pods
        .iter()
        .filter(|p| p.ready && p.pod_ip.is_some())
        .filter(|p| p.member_index.unwrap_or(0) == 0 || is_scrape_opt_in(p))
        .collect();
    eligible.sort_by_key(|p| {
        (
            p.ordinal.unwrap_or(u32::MAX),
            p.member_index.unwrap_or(0),
            p.uid.clone(),
        )
    });
    let mut plan = ScrapePlan {
        eligible_ready: eligible.len() as u32,
        capped: eligible.len() > MAX_SAMPLED_PODS,
        ..ScrapePlan::default()
    };
    for pod in eligible.into_iter().take(MAX_SAMPLED_PODS) {
        match url(pod) {
            Ok(url) => plan.targets.push(ScrapeTarget {
                uid: pod.uid.clone(),
                url,
            }),
            Err(reason) => plan.unusable.push((pod.uid.clone(), reason)),
        }
    }
    plan
}

fn url(pod: &PodFacts) -> Result<String, String> {
    let scheme = pod.scheme_annotation.as_deref().unwrap_or("http");
    if scheme != "http" && scheme != "https" {
        return Err(format!(
            "prometheus.io/scheme {scheme:?} is neither http nor https"
        ));
    }
    let port = match pod.port_annotation.as_deref() {
        None => 8000,
        Some(text) => text
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("prometheus.io/port {text:?} is not a port number"))?,
    };
    let path = pod.path_annotation.as_deref().unwrap_or("/metrics");
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let ip = pod.pod_ip.as_deref().unwrap_or_default();
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    Ok(format!("{scheme}://{host}:{port}{path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, ordinal: u32, member: Option<u32>) -> PodFacts {
        PodFacts {
            uid: uid.into(),
            ordinal: Some(ordinal),
            member_index: member,
            ready: true,
            pod_ip: Some(format!("10.0.0.{ordinal}")),
            ..PodFacts::default()
        }
    }

    #[test]
    fn leaders_only_unless_a_member_opts_in() {
        let mut opted = pod("c", 1, Some(1));
        opted.scrape_annotation = Some("true".into());
        let pods = [
            pod("a", 0, None),
            pod("b", 0, Some(1)),
            pod("d", 1, Some(0)),
            opted,
        ];
        let plan = plan(&pods);
        let uids: Vec<&str> = plan.targets.iter().map(|t| t.uid.as_str()).collect();
        assert_eq!(uids, vec!["a", "d", "c"]);
        assert_eq!(plan.eligible_ready, 3);
    }

    #[test]
    fn not_ready_pods_are_not_scraped() {
        let mut down = pod("a", 0, None);
        down.ready = false;
        assert!(plan(&[down]).targets.is_empty());
    }

    #[test]
    fn address_from_annotations_with_defaults() {
        let mut custom = pod("a", 0, None);
        custom.scheme_annotation = Some("https".into());
        custom.port_annotation = Some("9400".into());
        custom.path_annotation = Some("stats".into());
        let mut v6 = pod("b", 1, None);
        v6.pod_ip = Some("fd00::7".into());
        let plan = plan(&[custom, v6]);
        assert_eq!(plan.targets[0].url, "https://10.0.0.0:9400/stats");
        assert_eq!(plan.targets[1].url, "http://[fd00::7]:8000/metrics");
        let mut bad = pod("c", 0, None);
        bad.port_annotation = Some("http".into());
        let bad_plan = super::plan(&[bad]);
        assert!(bad_plan.targets.is_empty());
        assert!(bad_plan.unusable[0].1.contains("not a port number"));
    }

    #[test]
    fn at_most_64_pods_lowest_ordinals_first() {
        let pods: Vec<PodFacts> = (0..70)
            .rev()
            .map(|i| pod(&format!("p{i}"), i, None))
            .collect();
        let plan = plan(&pods);
        assert_eq!(plan.targets.len(), 64);
        assert!(plan.capped);
        assert_eq!(plan.eligible_ready, 70);
        assert_eq!(plan.targets[0].uid, "p0");
        assert_eq!(plan.targets[63].uid, "p63");
        assert!(!super::plan(&pods[..64]).capped);
    }
}
