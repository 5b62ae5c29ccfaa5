//! Which Pods of a role are scraped, and where (D6, TARGET.md §4).
//!
//! Ready Pods of the role, chosen by how the role's members serve (`loadBalance` in the
//! target's status): `Internal`, the leader (`member-index` 0 or absent) alone, since the other
//! members never answer; `External`, every member, each its own engine; otherwise (`Hybrid`,
//! `MultiPort`, `Unknown`, not reported) the leader plus any member that says
//! `prometheus.io/scrape: "true"`, where a non-leader that does not answer leaves coverage
//! complete. Address from `prometheus.io/{scheme,port,path}` defaulting to `http`, `8000` and
//! `/metrics`; at most [`MAX_SAMPLED_PODS`] Pods, lowest ordinals first. More eligible Pods
//! than that leave coverage incomplete.

use mds_api::target::LoadBalance;

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
    /// Coverage needs its answer; `false` for a non-leader scraped only because it opted in.
    pub required: bool,
}

/// The Pods to scrape this pass.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ScrapePlan {
    /// At most [`MAX_SAMPLED_PODS`], lowest ordinals first.
    pub targets: Vec<ScrapeTarget>,
    /// Ready Pods whose answer coverage needs, including those past the cap: with the opted-in
    /// members that answer, the endpoints role totals are estimated for (D9).
    pub required_ready: u32,
    /// More eligible Pods than the cap: coverage is incomplete and scale-down is held.
    pub capped: bool,
    /// Eligible Pods left out because an annotation is unusable, with the reason.
    pub unusable: Vec<(String, String)>,
}

fn is_scrape_opt_in(pod: &PodFacts) -> bool {
    pod.scrape_annotation.as_deref() == Some("true")
}

/// Whether a ready member is scraped under `load_balance`, and whether its answer is required.
fn scraped(pod: &PodFacts, load_balance: LoadBalance) -> Option<bool> {
    let leader = pod.member_index.unwrap_or(0) == 0;
    match load_balance {
        LoadBalance::External => Some(true),
        LoadBalance::Internal => leader.then_some(true),
        LoadBalance::Other if leader => Some(true),
        LoadBalance::Other => is_scrape_opt_in(pod).then_some(false),
    }
}

/// Chooses the Pods of one role to scrape (D6).
pub fn plan(pods: &[PodFacts], load_balance: LoadBalance) -> ScrapePlan {
    let mut eligible: Vec<(&PodFacts, bool)> = pods
        .iter()
        .filter(|p| p.ready && p.pod_ip.is_some())
        .filter_map(|p| Some((p, scraped(p, load_balance)?)))
        .collect();
    eligible.sort_by_key(|(p, _)| {
        (
            p.ordinal.unwrap_or(u32::MAX),
            p.member_index.unwrap_or(0),
            p.uid.clone(),
        )
    });
    let mut plan = ScrapePlan {
        required_ready: eligible.iter().filter(|(_, required)| *required).count() as u32,
        capped: eligible.len() > MAX_SAMPLED_PODS,
        ..ScrapePlan::default()
    };
    for (pod, required) in eligible.into_iter().take(MAX_SAMPLED_PODS) {
        match url(pod) {
            Ok(url) => plan.targets.push(ScrapeTarget {
                uid: pod.uid.clone(),
                url,
                required,
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

    fn scraped_uids(plan: &ScrapePlan) -> Vec<(&str, bool)> {
        plan.targets
            .iter()
            .map(|t| (t.uid.as_str(), t.required))
            .collect()
    }

    #[test]
    fn members_follow_the_roles_load_balancing() {
        let mut opted = pod("c", 1, Some(1));
        opted.scrape_annotation = Some("true".into());
        let pods = [
            pod("a", 0, None),
            pod("b", 0, Some(1)),
            pod("d", 1, Some(0)),
            opted,
        ];
        // Not reported (and Hybrid, MultiPort, Unknown): leaders, plus members that opt in,
        // whose answer coverage does not need.
        let other = plan(&pods, LoadBalance::Other);
        assert_eq!(
            scraped_uids(&other),
            vec![("a", true), ("d", true), ("c", false)]
        );
        assert_eq!(other.required_ready, 2);
        // Internal: only leaders serve, whatever the annotations say.
        let internal = plan(&pods, LoadBalance::Internal);
        assert_eq!(scraped_uids(&internal), vec![("a", true), ("d", true)]);
        assert_eq!(internal.required_ready, 2);
        // External: every member is an engine of its own.
        let external = plan(&pods, LoadBalance::External);
        assert_eq!(
            scraped_uids(&external),
            vec![("a", true), ("b", true), ("d", true), ("c", true)]
        );
        assert_eq!(external.required_ready, 4);
    }

    #[test]
    fn not_ready_pods_are_not_scraped() {
        let mut down = pod("a", 0, None);
        down.ready = false;
        assert!(plan(&[down], LoadBalance::Other).targets.is_empty());
    }

    #[test]
    fn address_from_annotations_with_defaults() {
        let mut custom = pod("a", 0, None);
        custom.scheme_annotation = Some("https".into());
        custom.port_annotation = Some("9400".into());
        custom.path_annotation = Some("stats".into());
        let mut v6 = pod("b", 1, None);
        v6.pod_ip = Some("fd00::7".into());
        let plan = plan(&[custom, v6], LoadBalance::Other);
        assert_eq!(plan.targets[0].url, "https://10.0.0.0:9400/stats");
        assert_eq!(plan.targets[1].url, "http://[fd00::7]:8000/metrics");
        let mut bad = pod("c", 0, None);
        bad.port_annotation = Some("http".into());
        let bad_plan = super::plan(&[bad], LoadBalance::Other);
        assert!(bad_plan.targets.is_empty());
        assert!(bad_plan.unusable[0].1.contains("not a port number"));
    }

    #[test]
    fn at_most_64_pods_lowest_ordinals_first() {
        let pods: Vec<PodFacts> = (0..70)
            .rev()
            .map(|i| pod(&format!("p{i}"), i, None))
            .collect();
        let plan = plan(&pods, LoadBalance::Other);
        assert_eq!(plan.targets.len(), 64);
        assert!(plan.capped);
        assert_eq!(plan.required_ready, 70);
        assert_eq!(plan.targets[0].uid, "p0");
        assert_eq!(plan.targets[63].uid, "p63");
        assert!(!super::plan(&pods[..64], LoadBalance::Other).capped);
    }
}
