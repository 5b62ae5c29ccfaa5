//! The controller under load on a real kube-apiserver: the GPUStack stand-in (mds-lab) mirrors
//! its world of instances, Kueue quota, retirements and engines into the API server, and the
//! engines answer on loopback addresses. Every wait has a deadline; nothing sleeps for a fixed
//! time.

use crate::common;

use std::time::Duration;

use common::*;
use jiff::SignedDuration;
use kube::api::{Api, PostParams};
use mds_api::ModelDeploymentScaler;
use mds_api::resources::TargetApiVersion;
use mds_api::target::ModelDeployment;
use mds_lab::{Load, LoadProfile, RoleSettings, WorldConfig};
use mds_testdata::{mk_role, mk_scaler, mk_target};
use mds_testkit::eventually;
use mds_testkit::standin::{StandIn, StandInOptions};
use serde_json::json;

const LONG: Duration = Duration::from_secs(150);

/// Engines that start in a second.
fn fast_world() -> WorldConfig {
    WorldConfig {
        default_role: RoleSettings {
            cold_start: SignedDuration::from_secs(1),
            ..RoleSettings::default()
        },
        ..WorldConfig::default()
    }
}

struct Scene {
    client: kube::Client,
    ns: String,
    targets: Api<ModelDeployment>,
    scalers: Api<ModelDeploymentScaler>,
    standin: StandIn,
}

async fn scene(hint: &str, quotas: &[(&str, u32)]) -> Option<Scene> {
    scene_in(hint, quotas, fast_world()).await
}

async fn scene_in(hint: &str, quotas: &[(&str, u32)], world: WorldConfig) -> Option<Scene> {
    let plane = mds_testkit::e2e()?;
    let ns = plane.namespace(hint).await.unwrap();
    let client = plane.client();
    let standin = StandIn::start(
        client.clone(),
        StandInOptions {
            namespace: Some(ns.clone()),
            world,
            tick: Duration::from_millis(200),
            quotas: quotas.iter().map(|(t, n)| (t.to_string(), *n)).collect(),
            ..StandInOptions::default()
        },
    )
    .await
    .unwrap();
    Some(Scene {
        targets: Api::namespaced_with(client.clone(), &ns, &TargetApiVersion::V1),
        scalers: Api::namespaced(client.clone(), &ns),
        client,
        ns,
        standin,
    })
}

/// `rps` requests per second of 1,000 prompt and 200 output tokens, no cache hits: 1,200
/// tokens per second of demand per request per second.
fn load(rps: f64) -> LoadProfile {
    LoadProfile::constant(Load::new(rps, 1000.0, 200.0, 0.0).unwrap()).unwrap()
}

/// A TokenThroughput scaler: 1,000 tokens per second per Server replica, or per Prefill and
/// Decode replica; short windows and timeouts (within the spec's ranges).
fn token_scaler(name: &str, roles: &[(&str, i32, i32)]) -> ModelDeploymentScaler {
    let scaler = roles.iter().fold(mk_scaler(name), |s, (r, min, max)| {
        s.role_bounds(r, *min, *max)
    });
    let sampling = json!({"intervalSeconds": 5, "pendingTimeoutSeconds": 60});
    let behavior = json!({"scaleDown": {"stabilizationWindowSeconds": 5,
        "cooldownAfterAbortSeconds": 30, "decodePostScaleUpGraceSeconds": 5}});
    let algorithm = json!({"type": "TokenThroughput", "tokenThroughput": {
        "serverTargetTokensPerSecond": "1000", "prefillTargetTokensPerSecond": "1000",
        "decodeTargetTokensPerSecond": "1000", "stableWindowSeconds": 30,
        "panicWindowSeconds": 10, "ttftTargetMilliseconds": "60000",
        "itlTargetMilliseconds": "60000"}});
    let scaler = scaler
        .field("sampling", sampling)
        .field("behavior", behavior);
    scaler.algorithm(algorithm).typed()
}

async fn create_md(scene: &Scene, name: &str, router: bool, roles: &[(&str, &str, i32)]) {
    let router = router.then_some("vllm-router");
    let target = mk_target(name).router(router).roles(roles).build();
    create_target_value(&scene.client, &scene.ns, target).await;
}

/// Target and scaler `llm`: one Server role at 2 replicas (bounds 1 to 8) under a load of
/// 4,800 tokens per second, which asks for five.
async fn server_under_load(scene: &Scene) {
    scene.standin.set_load(&scene.ns, "llm", None, load(4.0));
    create_md(scene, "llm", true, &[("server", "Server", 2)]).await;
    scene
        .scalers
        .create(
            &PostParams::default(),
            &token_scaler("llm", &[("server", 1, 8)]),
        )
        .await
        .unwrap();
}

async fn replicas(scene: &Scene, name: &str, role: &str) -> Option<i32> {
    let md = scene.targets.get(name).await.ok()?;
    md.spec
        .roles
        .iter()
        .find(|r| r.name == role)
        .map(|r| r.replicas())
}

async fn wait_replicas(scene: &Scene, name: &str, role: &str, want: impl Fn(i32) -> bool) -> i32 {
    eventually(&format!("{name}/{role} replicas"), LONG, || async {
        replicas(scene, name, role).await.filter(|n| want(*n))
    })
    .await
    .unwrap()
}

fn status_of(s: &ModelDeploymentScaler) -> &mds_api::status::ModelDeploymentScalerStatus {
    s.status.as_ref().expect("status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_scales_up_under_load_and_down_through_a_retirement() {
    let Some(scene) = scene("scale", &[]).await else {
        return;
    };
    server_under_load(&scene).await;
    let running = start(scene.client.clone(), &scene.ns).await;
    // 4,800 tokens per second over 1,000 per replica: five replicas.
    wait_replicas(&scene, "llm", "server", |n| n == 5).await;
    let s = wait_condition(&scene.scalers, "llm", "MetricsReady", "Observed").await;
    let role = &status_of(&s).roles[0];
    assert_eq!(role.raw_recommended_replicas, Some(5), "{role:?}");
    assert!(role.prompt_tokens_per_second.is_some());
    // The added replicas are admitted and ready: the cohort clears.
    eventually("the cohort is admitted", LONG, || async {
        let s = scene.scalers.get("llm").await.ok()?;
        s.status.as_ref()?.pending_cohort.is_none().then_some(())
    })
    .await
    .unwrap();

    // Load falls: one replica per pass, each through a retirement GPUStack completes.
    scene.standin.set_load(&scene.ns, "llm", None, load(1.0));
    wait_replicas(&scene, "llm", "server", |n| n == 4).await;
    // The target write lands first, the status with the record after it.
    let last = eventually("a scale-down record", LONG, || async {
        let s = scene.scalers.get("llm").await.ok()?;
        s.status?.last_scale_down
    })
    .await
    .unwrap();
    assert_eq!((last.role.as_str(), last.ordinal), ("server", 4));
    // The retirement appears, runs and disappears with ordinal 4's Pods.
    eventually("ordinal 4 retired", LONG, || async {
        let world = scene.standin.world();
        let md = scene.targets.get("llm").await.ok()?;
        let gone = md.status.as_ref().is_some_and(|st| st.retirement.is_none());
        let pods = world.all_pods().iter().filter(|p| p.ordinal == 4).count();
        (gone && pods == 0).then_some(())
    })
    .await
    .unwrap();
    wait_replicas(&scene, "llm", "server", |n| n <= 3).await;
    assert!(scene.standin.take_errors().is_empty());
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_of_two_pods_count_once_and_scale_down_with_every_member_annotated() {
    // GPUStack annotating every member for scraping, as some revisions may: with leader-served
    // parallelism (Internal) member 1 never answers, with data parallelism (External) it is an
    // engine of its own.
    let world = WorldConfig {
        annotate_non_leaders: true,
        ..fast_world()
    };
    let Some(scene) = scene_in("members", &[], world).await else {
        return;
    };
    // 840 tokens per second per role: one replica's worth, with a few first tokens to read a
    // p95 from in every interval.
    scene
        .standin
        .set_load(&scene.ns, "llm", Some("tp"), load(0.7));
    scene
        .standin
        .set_load(&scene.ns, "llm", Some("dp"), load(0.7));
    let role = |name: &str, extra: &[&str]| {
        let role = mk_role(name).kind("Server").replicas(2).size(2);
        role.field("extraArgs", json!(extra))
    };
    let target = mk_target("llm")
        .role(role("tp", &[]))
        .role(role("dp", &["--data-parallel-size=2"]));
    create_target_value(&scene.client, &scene.ns, target.build()).await;
    scene
        .scalers
        .create(
            &PostParams::default(),
            &token_scaler("llm", &[("tp", 1, 4), ("dp", 1, 4)]),
        )
        .await
        .unwrap();
    let running = start(scene.client.clone(), &scene.ns).await;
    // Two ready replicas of two Pods each are two replicas of capacity, fully covered.
    let observed = eventually(
        "both roles observed with two ready replicas",
        LONG,
        || async {
            let s = scene.scalers.get("llm").await.ok()?;
            let roles = &s.status.as_ref()?.roles;
            let two = ["tp", "dp"].iter().all(|name| {
                roles.iter().any(|r| {
                    r.name == *name
                        && r.ready_replicas == Some(2)
                        && r.prompt_tokens_per_second.is_some()
                })
            });
            two.then_some(s)
        },
    )
    .await
    .unwrap();
    assert!(
        status_of(&observed)
            .roles
            .iter()
            .all(|r| r.ready_replicas == Some(2)),
        "{:?}",
        status_of(&observed).roles
    );
    // Both shrink to one, through retirements.
    let both_one = eventually("tp and dp at one replica", LONG, || async {
        let tp = replicas(&scene, "llm", "tp").await?;
        let dp = replicas(&scene, "llm", "dp").await?;
        (tp == 1 && dp == 1).then_some(())
    })
    .await;
    if both_one.is_err() {
        let s = scene.scalers.get("llm").await.unwrap();
        let md = scene.targets.get("llm").await.unwrap();
        panic!(
            "not both at 1: scaler status {}\ntarget {}",
            serde_json::to_string_pretty(&s.status).unwrap(),
            serde_json::to_string_pretty(&md).unwrap()
        );
    }
    assert!(scene.standin.take_errors().is_empty());
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn growth_that_quota_never_admits_is_rolled_back() {
    // Two GPUs of h100: the two replicas there fill the quota, added ones wait for ever.
    let Some(scene) = scene("rollback", &[("h100", 2)]).await else {
        return;
    };
    server_under_load(&scene).await;
    let running = start(scene.client.clone(), &scene.ns).await;
    wait_replicas(&scene, "llm", "server", |n| n > 2).await;
    let s = scene.scalers.get("llm").await.unwrap();
    let cohort = status_of(&s)
        .pending_cohort
        .clone()
        .expect("a pending cohort");
    let started = cohort.started_at.unwrap().0;
    // pendingTimeoutSeconds (60) later the whole baseline comes back in one write.
    wait_replicas(&scene, "llm", "server", |n| n == 2).await;
    let rolled_back = jiff::Timestamp::now();
    let waited = rolled_back.duration_since(started).as_secs();
    assert!(
        (60..=90).contains(&waited),
        "rolled back {waited} s after the commit"
    );
    // The condition follows the pass after the rollback, which a loaded machine can delay
    // past WAIT: the longer deadline.
    let s = eventually("llm: Blocked ResourceExhausted", LONG, || async {
        let s = scene.scalers.get("llm").await.ok()?;
        (condition(&s, "Blocked").map(|c| c.1).as_deref() == Some("ResourceExhausted")).then_some(s)
    })
    .await
    .unwrap();
    assert!(status_of(&s).rebalance.is_some(), "an exhaustion episode");
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(scene.client.clone(), &scene.ns);
    let rollback = eventually("a ResourceExhausted event", LONG, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("ResourceExhausted"))
    })
    .await
    .unwrap();
    assert_eq!(rollback.action.as_deref(), Some("Rollback"));
    // Regrowth of the shortage's pool waits: the counts stay at the baseline meanwhile.
    let passes = running.telemetry.passes.get();
    eventually("two more passes", LONG, || async {
        (running.telemetry.passes.get() >= passes + 2).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(replicas(&scene, "llm", "server").await, Some(2));
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_retirement_is_restored_and_starts_the_cooldown() {
    // GPUStack refuses prefill/decode retirements outright: a shrink ends Aborted.
    let Some(scene) = scene("abort", &[]).await else {
        return;
    };
    scene.standin.set_load(&scene.ns, "llm", None, load(1.0));
    create_md(
        &scene,
        "llm",
        true,
        &[("prefill", "Prefill", 2), ("decode", "Decode", 3)],
    )
    .await;
    scene
        .scalers
        .create(
            &PostParams::default(),
            &token_scaler("llm", &[("prefill", 1, 4), ("decode", 1, 4)]),
        )
        .await
        .unwrap();
    let running = start(scene.client.clone(), &scene.ns).await;
    // No wait for the shrunk count itself: the stand-in aborts at once and the restoring pass
    // can follow within milliseconds, faster than any poll. The record is what lasts.
    let s = eventually("the abort restored", LONG, || async {
        let s = scene.scalers.get("llm").await.ok()?;
        let last = s.status.as_ref()?.last_scale_down.clone()?;
        (last.outcome == mds_api::status::ScaleDownOutcome::Aborted).then_some(s)
    })
    .await
    .unwrap();
    let last = status_of(&s).last_scale_down.clone().unwrap();
    assert!(last.cooldown_until.is_some() && last.aborted_at.is_some());
    assert_eq!(
        replicas(&scene, "llm", &last.role).await,
        last.pre_scale_down_vector.get(&last.role).copied(),
        "restored to the pre-scale-down count"
    );
    // During the cooldown nothing shrinks.
    let until = last.cooldown_until.unwrap().0;
    let counts = (
        replicas(&scene, "llm", "prefill").await,
        replicas(&scene, "llm", "decode").await,
    );
    eventually("a pass inside the cooldown", LONG, || async {
        let s = scene.scalers.get("llm").await.ok()?;
        (condition(&s, "Blocked").map(|c| c.1).as_deref() == Some("ScaleDownAborted")).then_some(())
    })
    .await
    .unwrap();
    if jiff::Timestamp::now() < until {
        assert_eq!(
            (
                replicas(&scene, "llm", "prefill").await,
                replicas(&scene, "llm", "decode").await
            ),
            counts
        );
    }
    stop(running).await;
}

/// The production cluster port with a user's edit slipped in right before the target write,
/// and snapshots read straight from the API server (no watch cache to lag behind the edit).
struct Racing {
    kube: mds_operator::kube_cluster::KubeCluster,
    client: kube::Client,
    ns: String,
    edit: std::sync::Mutex<Option<i32>>,
}

impl mds_operator::Cluster for Racing {
    async fn snapshot(&self, key: &mds_operator::ScalerKey) -> Option<mds_operator::Snapshot> {
        use std::sync::Arc;
        let scalers: Api<ModelDeploymentScaler> = Api::namespaced(self.client.clone(), &self.ns);
        let scaler = scalers.get_opt(&key.name).await.ok()??;
        let targets: Api<ModelDeployment> =
            Api::namespaced_with(self.client.clone(), &self.ns, &TargetApiVersion::V1);
        let target = targets.get_opt(&scaler.spec.target_ref.name).await.ok()?;
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), &self.ns);
        let selector = format!("app.kubernetes.io/instance={}", scaler.spec.target_ref.name);
        let pods = pods
            .list(&kube::api::ListParams::default().labels(&selector))
            .await
            .ok()?;
        let workloads: Api<mds_api::target::Workload> =
            Api::namespaced(self.client.clone(), &self.ns);
        let workloads = workloads.list(&Default::default()).await.ok()?;
        Some(mds_operator::Snapshot {
            target_problem: None,
            scaler: Arc::new(scaler),
            target: target.map(Arc::new),
            pods: pods.items.into_iter().map(Arc::new).collect(),
            workloads: Some(workloads.items.into_iter().map(Arc::new).collect()),
        })
    }

    async fn patch_target(
        &self,
        namespace: &str,
        target: &str,
        ops: &[mds_core::PatchOp],
    ) -> Result<ModelDeployment, mds_operator::WriteError> {
        let edit = self.edit.lock().unwrap().take();
        if let Some(n) = edit {
            let patch: json_patch::Patch = serde_json::from_value(json!([
                {"op": "replace", "path": "/spec/roles/0/replicas", "value": n}
            ]))
            .unwrap();
            let targets: Api<ModelDeployment> =
                Api::namespaced_with(self.client.clone(), namespace, &TargetApiVersion::V1);
            targets
                .patch(
                    target,
                    &Default::default(),
                    &kube::api::Patch::Json::<()>(patch),
                )
                .await
                .unwrap();
        }
        self.kube.patch_target(namespace, target, ops).await
    }

    async fn write_status(
        &self,
        scaler: &ModelDeploymentScaler,
        status: &mds_api::status::ModelDeploymentScalerStatus,
    ) -> Result<ModelDeploymentScaler, mds_operator::WriteError> {
        self.kube.write_status(scaler, status).await
    }

    async fn set_finalizer(
        &self,
        scaler: &ModelDeploymentScaler,
        present: bool,
    ) -> Result<ModelDeploymentScaler, mds_operator::WriteError> {
        self.kube.set_finalizer(scaler, present).await
    }

    async fn emit(&self, scaler: &ModelDeploymentScaler, event: &mds_core::Event) {
        self.kube.emit(scaler, event).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_replica_edit_fails_our_test_and_the_next_pass_replans() {
    use mds_operator::{ScalerKey, WriteError};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let Some(scene) = scene("race", &[]).await else {
        return;
    };
    server_under_load(&scene).await;
    eventually("two ready engines", LONG, || async {
        let world = scene.standin.world();
        (world.all_pods().iter().filter(|p| p.ready).count() == 2).then_some(())
    })
    .await
    .unwrap();
    let caches = Arc::new(mds_operator::kube_cluster::Caches::new(true));
    let cluster = Racing {
        kube: mds_operator::kube_cluster::KubeCluster::new(
            scene.client.clone(),
            caches,
            TargetApiVersion::V1,
            "e2e".into(),
            Arc::new(AtomicBool::new(true)),
        ),
        client: scene.client.clone(),
        ns: scene.ns.clone(),
        edit: std::sync::Mutex::new(None),
    };
    let source = mds_operator::http_source::HttpSource::new(Default::default()).unwrap();
    let mut worker = mds_operator::Worker::new(ScalerKey {
        namespace: scene.ns.clone(),
        name: "llm".into(),
    });
    let pass_after_interval = async |worker: &mut mds_operator::Worker| {
        let started = std::time::Instant::now();
        eventually("an interval", LONG, || async {
            (started.elapsed() >= Duration::from_secs(5)).then_some(())
        })
        .await
        .unwrap();
        worker.pass(&cluster, &source, jiff::Timestamp::now()).await
    };
    let report = worker.pass(&cluster, &source, jiff::Timestamp::now()).await;
    assert!(matches!(
        report.write,
        Some((mds_core::WriteKind::Bind, Ok(())))
    ));
    // The plan is 2 -> 5; a user sets 3 just before our write lands.
    *cluster.edit.lock().unwrap() = Some(3);
    let report = pass_after_interval(&mut worker).await;
    assert!(
        matches!(
            report.write,
            Some((mds_core::WriteKind::Commit, Err(WriteError::Conflict(_))))
        ),
        "{:?}",
        report.write
    );
    assert!(
        report.status.is_none(),
        "no status for a write that did not land"
    );
    assert_eq!(
        replicas(&scene, "llm", "server").await,
        Some(3),
        "the user's count stands"
    );
    // The next pass plans from 3 and lands.
    let report = pass_after_interval(&mut worker).await;
    assert!(
        matches!(report.write, Some((mds_core::WriteKind::Commit, Ok(())))),
        "{:?}",
        report.write
    );
    let plan = report.plan.unwrap();
    assert_eq!(plan.roles[0].current, 3, "planned from the user's count");
    assert_eq!(
        replicas(&scene, "llm", "server").await,
        Some(plan.roles[0].constrained)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_resumes_a_pending_cohort_from_status_and_rolls_back_on_time() {
    let Some(scene) = scene("resume", &[("h100", 2)]).await else {
        return;
    };
    server_under_load(&scene).await;
    let a = replica(scene.client.clone(), &scene.ns, "replica-a").await;
    eventually("replica a leads", LONG, || async {
        a.leads().then_some(())
    })
    .await
    .unwrap();
    let b = replica(scene.client.clone(), &scene.ns, "replica-b").await;
    wait_replicas(&scene, "llm", "server", |n| n > 2).await;
    let s = eventually("the cohort in status", LONG, || async {
        let s = scene.scalers.get("llm").await.ok()?;
        s.status.as_ref()?.pending_cohort.is_some().then_some(s)
    })
    .await
    .unwrap();
    let started = status_of(&s)
        .pending_cohort
        .clone()
        .unwrap()
        .started_at
        .unwrap()
        .0;
    // The growth's event is posted after its writes; a crash between the two loses it, which
    // is not what this test is about, so the leader dies once the event is recorded.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(scene.client.clone(), &scene.ns);
    let count = |reason: &'static str| {
        let events = events.clone();
        async move {
            events
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .map(|e| e.deprecated_count.unwrap_or(1).max(1))
                .sum::<i32>()
        }
    };
    eventually("the growth event", LONG, || async {
        (count("Scaled").await >= 1).then_some(())
    })
    .await
    .unwrap();
    // The leader dies in the middle of the pending cohort.
    a.kill();
    eventually("replica b leads", LONG, || async {
        b.leads().then_some(())
    })
    .await
    .unwrap();
    // b knows the cohort only from status, and rolls it back pendingTimeoutSeconds after it
    // was committed, not after it took over.
    wait_replicas(&scene, "llm", "server", |n| n == 2).await;
    let waited = jiff::Timestamp::now().duration_since(started).as_secs();
    assert!(
        (60..=90).contains(&waited),
        "rolled back {waited} s after the commit"
    );
    eventually("the rollback event", LONG, || async {
        (count("ResourceExhausted").await >= 1).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(
        count("ResourceExhausted").await,
        1,
        "one rollback, no double write"
    );
    assert_eq!(
        count("Scaled").await,
        1,
        "one growth decision, none lost or repeated"
    );
    b.kill();
}
