//! The objects a mirror writes: Pods with TARGET.md section 4's labels and annotations,
//! Workloads, and the ModelDeployment status of section 3, for a two-role target.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use mds_api::target::{ModelDeployment, WorkloadAdmission};
use mds_sim::{PodPhase, World};

fn two_roles() -> (World, mds_sim::DeploymentKey) {
    let mut world = world(20);
    let md = target(
        "llm",
        "SGLang",
        true,
        &[("prefill", "Prefill", 2, 1), ("decode", "Decode", 1, 2)],
    );
    let k = world.apply_deployment(md).unwrap();
    world.advance_to(t(30)).unwrap();
    (world, k)
}

fn label<'a>(pod: &'a mds_sim::PodView, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(pod: &'a mds_sim::PodView, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

#[test]
fn pods_carry_the_gpustack_labels_and_scrape_annotations() {
    let (world, k) = two_roles();
    let pods = world.pods(&k);
    assert_eq!(
        pods.len(),
        4,
        "two prefill instances of one Pod, one decode instance of two"
    );
    for pod in &pods {
        assert_eq!(
            label(pod, "app.kubernetes.io/name"),
            Some("model-deployment")
        );
        assert_eq!(label(pod, "app.kubernetes.io/instance"), Some("llm"));
        assert_eq!(
            label(pod, "app.kubernetes.io/component"),
            Some(pod.role.as_str())
        );
        assert_eq!(
            label(pod, "modeldeployment.gpustack.ai/pod-ordinal"),
            Some(pod.ordinal.to_string().as_str())
        );
        assert_eq!(
            label(pod, "modeldeployment.gpustack.ai/member-index"),
            Some(pod.member_index.to_string().as_str())
        );
        assert_eq!(
            label(pod, "modeldeployment.gpustack.ai/role-kind"),
            Some(pod.role.as_str()),
            "prefill, decode"
        );
        assert_eq!(
            label(pod, "modeldeployment.gpustack.ai/endpoint-eligible"),
            Some("true")
        );
        assert_eq!(label(pod, "kueue.x-k8s.io/queue-name"), Some("h100"));
        let group = label(pod, "kueue.x-k8s.io/pod-group-name").unwrap();
        assert!(group.starts_with("gpustack-fnv64-") && group.len() == 31);
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("ModelDeployment", "llm", Some(true))
        );
        assert_eq!(
            Some(owner.uid.as_str()),
            world.deployment(&k).unwrap().metadata.uid.as_deref()
        );
        assert!(pod.ready && pod.phase == PodPhase::Running && pod.pod_ip.is_some());
        let leader = pod.member_index == 0;
        assert_eq!(
            annotation(pod, "prometheus.io/scrape"),
            leader.then_some("true")
        );
        assert_eq!(
            annotation(pod, "prometheus.io/port"),
            leader.then_some("8000")
        );
        assert_eq!(
            annotation(pod, "prometheus.io/path"),
            leader.then_some("/metrics")
        );
        assert_eq!(
            annotation(pod, "prometheus.io/scheme"),
            leader.then_some("http")
        );
        assert_eq!(pod.serves_metrics, leader);
    }
    let decode: Vec<&str> = pods
        .iter()
        .filter(|p| p.role == "decode")
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(decode, vec!["llm-decode-r0-m0", "llm-decode-r0-m1"]);
    let prefill = pods.iter().find(|p| p.role == "prefill").unwrap();
    assert!(
        prefill
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("llm-prefill-"),
        "generated at size 1"
    );
    let groups: BTreeSet<&str> = pods
        .iter()
        .map(|p| label(p, "kueue.x-k8s.io/pod-group-name").unwrap())
        .collect();
    assert_eq!(groups.len(), 3, "one pod group per instance");
    let ips: BTreeSet<&str> = pods.iter().map(|p| p.pod_ip.as_deref().unwrap()).collect();
    assert_eq!(ips.len(), 4, "a distinct address per Pod");
    assert!(ips.iter().all(|ip| ip.starts_with("127.")));
}

#[test]
fn workloads_name_their_pods_and_carry_admission_conditions() {
    let (world, k) = two_roles();
    let workloads = world.workloads(&k);
    assert_eq!(workloads.len(), 3);
    let pods = world.pods(&k);
    for wl in &workloads {
        let name = wl.metadata.name.as_deref().unwrap();
        let members: Vec<_> = pods
            .iter()
            .filter(|p| label(p, "kueue.x-k8s.io/pod-group-name") == Some(name))
            .collect();
        let owners = wl.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), members.len());
        assert!(members.iter().all(|p| {
            owners
                .iter()
                .any(|o| Some(o.uid.as_str()) == p.metadata.uid.as_deref())
        }));
        assert_eq!(wl.spec.pod_sets[0].name, members[0].role);
        assert_eq!(wl.spec.pod_sets[0].count, Some(members.len() as i32));
        assert_eq!(wl.spec.queue_name.as_deref(), Some("h100"));
        assert_eq!(wl.admission(), WorkloadAdmission::Admitted);
        let conditions = &wl.status.as_ref().unwrap().conditions;
        assert!(conditions.iter().all(|c| c.last_transition_time.is_some()));
    }
    // Serialized the way the API server stores it.
    let json = serde_json::to_value(&workloads[0]).unwrap();
    assert_eq!(json["spec"]["active"], true);
    assert_eq!(json["status"]["conditions"][0]["type"], "QuotaReserved");
}

#[test]
fn the_status_counts_instances_and_summarises_roles() {
    let (world, k) = two_roles();
    let md = world.deployment(&k).unwrap();
    let status = md.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_eq!(status.role_summary.as_deref(), Some("1R2P1D"));
    assert!(status.retirement.is_none());
    let roles: Vec<_> = status
        .roles
        .iter()
        .map(|r| {
            (
                r.name.as_str(),
                r.kind.clone().unwrap().to_string(),
                r.desired,
                r.ready,
                r.quota_reserved,
                r.unmanaged,
            )
        })
        .collect();
    assert_eq!(
        roles,
        vec![
            (
                "prefill",
                "Prefill".into(),
                Some(2),
                Some(2),
                Some(2),
                Some(false)
            ),
            (
                "decode",
                "Decode".into(),
                Some(1),
                Some(1),
                Some(1),
                Some(false)
            ),
        ]
    );
    let conditions: Vec<(&str, &str, &str)> = status
        .conditions
        .iter()
        .map(|c| {
            (
                c.condition_type.as_str(),
                c.status.as_str(),
                c.reason.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        conditions,
        vec![
            ("QuotaReserved", "True", "Reserved"),
            ("ReplicasUpToDate", "True", "UpToDate"),
            ("RoleKindsReady", "True", "AllKindsReady"),
            ("RouterReady", "True", "Ready"),
        ]
    );
    // The status round-trips through the read model the scaler uses.
    let json = serde_json::to_value(md).unwrap();
    assert!(
        json["status"].get("observedGeneration").is_none(),
        "no top-level observedGeneration"
    );
    let back: ModelDeployment = serde_json::from_value(json).unwrap();
    assert_eq!(&back, md);
}

#[test]
fn during_a_cold_start_the_status_is_starting_and_conditions_keep_their_transition_time() {
    let mut world = world(60);
    let k = world
        .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 2, 1)]))
        .unwrap();
    world.step(t(1)).unwrap();
    let status = world.deployment(&k).unwrap().status.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Starting"));
    let kinds = status
        .conditions
        .iter()
        .find(|c| c.condition_type == "RoleKindsReady")
        .unwrap();
    assert_eq!(kinds.status, "False");
    let since = kinds.last_transition_time.clone();
    world.advance_to(t(30)).unwrap();
    let later = world.deployment(&k).unwrap().status.clone().unwrap();
    let kinds = later
        .conditions
        .iter()
        .find(|c| c.condition_type == "RoleKindsReady")
        .unwrap();
    assert_eq!(
        kinds.last_transition_time, since,
        "unchanged status keeps its time"
    );
}

#[test]
fn uids_assigned_by_an_api_server_are_adopted() {
    let (mut world, k) = two_roles();
    let pod = world
        .pods(&k)
        .into_iter()
        .find(|p| p.role == "decode")
        .unwrap();
    let name = pod.metadata.name.clone().unwrap();
    world.set_pod_uid("serving", &name, "real-pod-uid").unwrap();
    let group = label(&pod, "kueue.x-k8s.io/pod-group-name")
        .unwrap()
        .to_string();
    world
        .set_workload_uid("serving", &group, "real-wl-uid")
        .unwrap();
    let wl = world
        .workloads(&k)
        .into_iter()
        .find(|w| w.metadata.name.as_deref() == Some(group.as_str()))
        .unwrap();
    assert_eq!(wl.metadata.uid.as_deref(), Some("real-wl-uid"));
    assert!(
        wl.metadata
            .owner_references
            .unwrap()
            .iter()
            .any(|o| o.uid == "real-pod-uid")
    );
    assert!(world.set_pod_uid("serving", "nope", "x").is_err());
}

#[test]
fn addresses_count_up_from_the_first_slot() {
    let config = mds_sim::WorldConfig {
        first_ip_slot: 253 * 5,
        ..mds_sim::WorldConfig::default()
    };
    let mut world = World::new(config, t(0)).unwrap();
    let k = world
        .apply_deployment(target("llm", "vLLM", true, &[("server", "Server", 2, 1)]))
        .unwrap();
    world.advance_to(t(120)).unwrap();
    let mut ips: Vec<String> = world
        .pods(&k)
        .iter()
        .filter_map(|p| p.pod_ip.clone())
        .collect();
    ips.sort();
    assert_eq!(ips, ["127.0.5.2", "127.0.5.3"]);
    assert!(world.metrics_page_at_slot(253 * 5).is_some());
}

/// The token counter line of a vLLM page.
fn generated_tokens(page: &str) -> f64 {
    page.lines()
        .find(|l| l.starts_with("vllm:generation_tokens_total{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("a generation token counter")
}

#[test]
fn a_page_read_between_steps_serves_only_its_own_deployment_up_to_then() {
    let load = mds_sim::LoadProfile::constant(mds_sim::Load::new(4.0, 1000.0, 200.0, 0.0).unwrap())
        .unwrap();
    let mut world = world(1);
    let mut keys = Vec::new();
    for name in ["a", "b"] {
        let k = world
            .apply_deployment(target(name, "vLLM", true, &[("server", "Server", 1, 1)]))
            .unwrap();
        world.set_load(&k, "server", load.clone()).unwrap();
        keys.push(k);
    }
    world.advance_to(t(10)).unwrap();
    let slot = |world: &World, k: &mds_sim::DeploymentKey| world.pods(k)[0].ip_slot;
    let (a, b) = (slot(&world, &keys[0]), slot(&world, &keys[1]));
    // The same world stepped to the moment of the read.
    let mut stepped = world.clone();
    stepped
        .step(t(10) + jiff::SignedDuration::from_millis(500))
        .unwrap();

    let as_of = world.metrics_page_at_slot_as_of(a, t(10) + jiff::SignedDuration::from_millis(500));
    assert_eq!(as_of, stepped.metrics_page_at_slot(a));
    let before = generated_tokens(world.metrics_page_at_slot(b).as_ref().unwrap());
    assert!(before < generated_tokens(stepped.metrics_page_at_slot(b).as_ref().unwrap()));
    assert_eq!(world.now(), t(10), "the world itself did not step");
    // An earlier moment changes nothing; the next step serves from where the read left off.
    let again = world.metrics_page_at_slot_as_of(a, t(10));
    assert_eq!(again, stepped.metrics_page_at_slot(a));
    world.step(t(11)).unwrap();
    stepped.step(t(11)).unwrap();
    assert_eq!(
        world.metrics_page_at_slot(a),
        stepped.metrics_page_at_slot(a)
    );
    let rate = generated_tokens(world.metrics_page_at_slot(b).as_ref().unwrap()) - before;
    assert!(
        (rate - 800.0).abs() < 1.0,
        "b served one second at 800 tokens/s: {rate}"
    );
    assert_eq!(world.metrics_page_at_slot_as_of(9_999, t(12)), None);
}

#[test]
fn members_serve_as_the_roles_load_balancing_says_and_the_status_reports_it() {
    let load = mds_sim::LoadProfile::constant(mds_sim::Load::new(4.0, 1000.0, 200.0, 0.0).unwrap())
        .unwrap();
    let mut world = world(1);
    let mut md = target(
        "dp",
        "vLLM",
        true,
        &[("tp", "Server", 1, 2), ("dp", "Server", 1, 2)],
    );
    md.spec.roles[1].extra_args = vec!["--data-parallel-size=2".into()];
    let k = world.apply_deployment(md).unwrap();
    world.set_load(&k, "tp", load.clone()).unwrap();
    world.set_load(&k, "dp", load).unwrap();
    world.advance_to(t(10)).unwrap();
    let reported = |role: &str| {
        role_status(&world, &k, role)
            .parallelism
            .and_then(|p| p.load_balance)
    };
    assert_eq!(reported("tp").as_deref(), Some("Internal"));
    assert_eq!(reported("dp").as_deref(), Some("External"));
    let pages = |role: &str| -> Vec<Option<String>> {
        let mut pods: Vec<_> = world
            .pods(&k)
            .into_iter()
            .filter(|p| p.role == role)
            .collect();
        pods.sort_by_key(|p| p.member_index);
        pods.iter()
            .map(|p| world.metrics_page_at_slot(p.ip_slot))
            .collect()
    };
    // Internal: the leader serves the whole instance; member 1 never answers.
    let tp = pages("tp");
    assert!(tp[0].is_some() && tp[1].is_none());
    // External: both members serve, each half of the instance's work.
    let dp = pages("dp");
    let shares: Vec<f64> = dp
        .iter()
        .map(|p| generated_tokens(p.as_ref().unwrap()))
        .collect();
    let whole = generated_tokens(tp[0].as_ref().unwrap());
    assert!(whole > 0.0);
    assert!(
        shares[0] + shares[1] == whole && (0.0..=1.0).contains(&(shares[0] - shares[1])),
        "{shares:?} of {whole}"
    );
}
