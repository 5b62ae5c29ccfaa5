//! `mds replay` as a user runs it.

use crate::common;

use common::{Scratch, mds, text};
use proptest::prelude::*;

const SCALER: &str = "examples/replay/scaler.yaml";
const TARGET: &str = "examples/replay/target.yaml";

/// Replays `timeline` (text) for the example scaler and target; returns the exit code and
/// standard error.
fn replay_timeline(timeline: &str) -> (Option<i32>, String) {
    let scratch = Scratch::new("replay-timeline");
    let path = scratch.file("t.jsonl", timeline);
    let out = mds(
        &[
            "replay",
            "--scaler",
            SCALER,
            "--target",
            TARGET,
            "--timeline",
            &path,
        ],
        None,
    );
    (out.status.code(), text(&out.stderr))
}

/// A valid first line, so problems sit on line 2.
const FIRST: &str = "{\"t\": 0, \"roles\": {\"prefill\": {\"readyReplicas\": 2}}}\n";

#[test]
fn replay_prints_each_pass_and_json_lines() {
    let args = [
        "replay",
        "--scaler",
        "examples/replay/scaler.yaml",
        "--target",
        "examples/replay/target.yaml",
        "--timeline",
        "examples/replay/timeline.jsonl",
    ];
    let out = mds(&args, None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("write: bind  term 1"), "{stdout}");
    assert!(
        stdout.contains("write: rollback decode=3 prefill=3 term 1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("MetricsReady=False (ResourceExhausted)"),
        "{stdout}"
    );

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = mds(&json_args, None);
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 30, "one object per timeline pass");
    assert_eq!(lines[0]["write"]["kind"], "bind");
    assert_eq!(lines[0]["conditions"]["Bound"]["status"], "True");
    let commit = lines
        .iter()
        .find(|l| l["write"]["kind"] == "commit")
        .expect("a commit");
    assert!(
        commit["write"]["decisionID"]
            .as_str()
            .unwrap()
            .starts_with("llm-serving-t1-")
    );
    assert_eq!(
        commit["roles"]["prefill"]["raw"],
        commit["write"]["vector"]["prefill"]
    );
    // The same inputs give byte-identical output.
    assert_eq!(mds(&json_args, None).stdout, out.stdout);
}

#[test]
fn a_broken_timeline_is_refused_naming_the_line_and_field() {
    let (code, stderr) = replay_timeline(&format!(
        "{FIRST}{{\"t\": 15, \"roles\": {{\"prefill\": {{\"readyReplica\": 2}}}}}}\n"
    ));
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("t.jsonl: timeline line 2: roles.prefill: \"readyReplica\" is not a field here; did you mean readyReplicas?"),
        "{stderr}"
    );
    for rust_word in ["u32", "f64", "struct", "variant"] {
        assert!(!stderr.contains(rust_word), "{stderr}");
    }
}

#[test]
fn out_of_range_times_exit_2_naming_line_field_and_range() {
    for t in ["1767225600000", "1e19", "-1", "315360001"] {
        let (code, stderr) = replay_timeline(&format!("{FIRST}{{\"t\": {t}, \"roles\": {{}}}}\n"));
        assert_eq!(code, Some(2), "t {t}: {stderr}");
        assert!(
            stderr.contains("mds: error: ") && stderr.contains("timeline line 2: t: "),
            "t {t}: {stderr}"
        );
        assert!(
            stderr.contains("allowed is 0 to 315360000 seconds"),
            "t {t}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (code, stderr) = replay_timeline(&format!("{FIRST}{{\"t\": 0, \"roles\": {{}}}}\n"));
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("timeline line 2: t: 0 does not come after 0 (line 1)"),
        "{stderr}"
    );
}

#[test]
fn names_and_states_the_target_lacks_are_refused_with_the_known_names() {
    let cases = [
        (
            r#"{"t": 15, "roles": {"prefil": {"readyReplicas": 2}}}"#,
            "timeline line 2: roles: \"prefil\" is not a role of the target; did you mean prefill? its roles are decode and prefill",
        ),
        (
            r#"{"t": 15, "target": {"replicas": {"nope": 2}}}"#,
            "timeline line 2: target.replicas: \"nope\" is not a role of the target; its roles are decode and prefill",
        ),
        (
            r#"{"t": 15, "target": {"unadmitted": {"decod": [3]}}}"#,
            "timeline line 2: target.unadmitted: \"decod\" is not a role of the target; did you mean decode?",
        ),
        (
            r#"{"t": 15, "target": {"retirement": {"role": "server", "ordinal": 1, "state": "Draining"}}}"#,
            "timeline line 2: target.retirement.role: \"server\" is not a role of the target",
        ),
        (
            r#"{"t": 15, "target": {"retirement": {"role": "decode", "ordinal": 1, "state": "Abort"}}}"#,
            "timeline line 2: target.retirement.state: \"Abort\" is not a retirement state; did you mean Aborted? use one of Admitted, Disqualified, Withdrawing, Draining, Deleting, Settling, Completed or Aborted",
        ),
        (
            r#"{"t": 15, "roles": {"decode": {"signalState": "fresh"}}}"#,
            "timeline line 2: roles.decode.signalState: \"fresh\" is not one of Fresh, Idle, Missing or Stale; did you mean Fresh?",
        ),
        (
            r#"{"t": 15, "roles": {"decode": {"kvCacheUsage": 85}}}"#,
            "timeline line 2: roles.decode.kvCacheUsage: 85 is out of range; a usage fraction lies from 0 to 1",
        ),
        (
            r#"{"t": 15, "roles": {"decode": {"waitingRequests": -3}}}"#,
            "timeline line 2: roles.decode.waitingRequests: -3 is negative",
        ),
        (
            r#"{"t": 15, "target": {"replicas": {"decode": 5000000}}}"#,
            "timeline line 2: target.replicas.decode: 5000000 is out of range; allowed is 0 to 1024",
        ),
    ];
    for (line, expected) in cases {
        let (code, stderr) = replay_timeline(&format!("{FIRST}{line}\n"));
        assert_eq!(code, Some(2), "{line}: {stderr}");
        assert!(stderr.contains(expected), "{line}:\n{stderr}");
    }
}

#[test]
fn scalers_and_targets_admission_refuses_are_not_replayed() {
    let scratch = Scratch::new("replay-admission");
    let timeline = scratch.file("t.jsonl", FIRST);
    let scaler = std::fs::read_to_string(common::repo().join(SCALER)).unwrap();
    let target = std::fs::read_to_string(common::repo().join(TARGET)).unwrap();
    let cases = [
        (
            "interval",
            scaler.replace(
                "pendingTimeoutSeconds: 60",
                "pendingTimeoutSeconds: 60\n    intervalSeconds: 1",
            ),
            target.clone(),
        ),
        (
            "min > max",
            scaler.replace(
                "minReplicas: 2\n      maxReplicas: 8\n    - name: decode",
                "minReplicas: 9\n      maxReplicas: 8\n    - name: decode",
            ),
            target.clone(),
        ),
        (
            "command role",
            scaler.clone(),
            target.replace(
                "kind: Decode",
                "kind: Decode\n      command: [python, serve.py]",
            ),
        ),
        (
            "unknown kind under a token algorithm",
            scaler.clone(),
            target.replace("kind: Decode", "kind: Speculator"),
        ),
    ];
    for (case, scaler, target) in cases {
        let scaler = scratch.file("scaler.yaml", &scaler);
        let target = scratch.file("target.yaml", &target);
        let validate = mds(&["validate", "-f", &scaler, "--target", &target], None);
        assert_eq!(
            validate.status.code(),
            Some(1),
            "{case}: validate refuses it"
        );
        let findings: Vec<String> = text(&validate.stdout)
            .lines()
            .filter(|l| l.starts_with("  ") && !l.contains("warning:"))
            .map(str::to_string)
            .collect();
        assert!(!findings.is_empty(), "{case}");
        let out = mds(
            &[
                "replay",
                "--scaler",
                &scaler,
                "--target",
                &target,
                "--timeline",
                &timeline,
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(1), "{case}: {}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("mds: error: "), "{stderr}");
        assert!(
            stderr.contains("admission refuses it, so it is not replayed"),
            "{stderr}"
        );
        for finding in findings {
            assert!(
                stderr.contains(&finding),
                "{case}: same message as validate: {finding}\n{stderr}"
            );
        }
        assert!(text(&out.stdout).is_empty(), "{case}: nothing replayed");
    }
}

#[test]
fn documents_are_picked_by_kind_from_multi_document_files() {
    let example = "examples/prefill-decode-encode.yaml";
    let out = mds(
        &[
            "replay",
            "--scaler",
            example,
            "--target",
            example,
            "--timeline",
            "examples/replay/timeline.jsonl",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("encode       no observation"),
        "{}",
        text(&out.stdout)
    );

    let wrong = |scaler: &str, target: &str| {
        let out = mds(
            &[
                "replay",
                "--scaler",
                scaler,
                "--target",
                target,
                "--timeline",
                "examples/replay/timeline.jsonl",
            ],
            None,
        );
        (out.status.code(), text(&out.stderr))
    };
    let (code, stderr) = wrong(TARGET, TARGET);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("mds: error: examples/replay/target.yaml holds no ModelDeploymentScaler; it holds ModelDeployment \"llm-serving\""), "{stderr}");
    let (code, stderr) = wrong(SCALER, SCALER);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("examples/replay/scaler.yaml holds no ModelDeployment; it holds ModelDeploymentScaler \"llm-serving\""), "{stderr}");
    let (code, stderr) = wrong(SCALER, example);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("holds no ModelDeployment named \"llm-serving\", the name the scaler's spec.targetRef.name gives; it holds ModelDeployment \"vl-serving\""), "{stderr}");
}

/// Timeline lines made of plausible and implausible pieces.
fn timeline_line() -> impl Strategy<Value = String> {
    let t = prop_oneof![
        (0u32..100_000).prop_map(|t| t.to_string()),
        Just("1767225600000".to_string()),
        Just("1e19".to_string()),
        Just("-1".to_string()),
        any::<f64>().prop_map(|f| format!("{f:e}")),
    ];
    let role = prop_oneof![Just("prefill"), Just("decode"), Just("prefil")];
    let field = prop_oneof![
        Just("readyReplicas"),
        Just("sampledReplicas"),
        Just("promptTokensPerSecond"),
        Just("kvCacheUsage"),
        Just("waitingRequests"),
        Just("itlMilliseconds"),
        Just("bogus"),
    ];
    let number = prop_oneof![
        (0u32..3000).prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("1e308".to_string()),
        Just("\"x\"".to_string()),
    ];
    let target = prop_oneof![
        Just(String::new()),
        (role.clone(), any::<i32>()).prop_map(|(r, n)| format!(", \"target\": {{\"replicas\": {{\"{r}\": {n}}}}}")),
        (role.clone(), 0i32..2000).prop_map(|(r, o)| format!(", \"target\": {{\"unadmitted\": {{\"{r}\": [{o}]}}}}")),
        (role.clone(), any::<i32>(), prop_oneof![Just("Aborted"), Just("Draining"), Just("Abort")])
            .prop_map(|(r, o, s)| format!(", \"target\": {{\"retirement\": {{\"role\": \"{r}\", \"ordinal\": {o}, \"state\": \"{s}\"}}}}")),
        Just(", \"target\": {\"retirement\": null}".to_string()),
    ];
    prop_oneof![
        10 => (t, role, field, number, target).prop_map(|(t, r, f, n, target)| {
            format!("{{\"t\": {t}, \"roles\": {{\"{r}\": {{\"{f}\": {n}}}}}{target}}}")
        }),
        1 => "[ -~]{0,30}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// No timeline makes replay panic (exit 101): it either replays or refuses the input.
    #[test]
    fn arbitrary_timelines_never_panic(lines in proptest::collection::vec(timeline_line(), 0..12)) {
        let (code, stderr) = replay_timeline(&lines.join("\n"));
        prop_assert!(matches!(code, Some(0) | Some(2)), "exit {:?}: {}", code, stderr);
        prop_assert!(!stderr.contains("panicked"), "{}", stderr);
    }
}

// A replay starts from the `status` the scaler file carries, as a controller starting up reads
// it (D19, D29): a target with a UID and no scaler annotations, as a release leaves it.

/// A server-role target at `replicas`, generation 4, unannotated.
fn server_target(replicas: i32) -> String {
    format!(
        "apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata:
  name: llm
  uid: 7f0c-target-uid
  generation: 4
spec:
  engine:
    name: vLLM
  router:
    name: vllm-router
  roles:
    - name: server
      kind: Server
      replicas: {replicas}
      instanceType: h100
"
    )
}

/// A Proportional scaler (10 running requests per replica) at spec generation `generation`,
/// with `algorithm` in place of the default and `status` (YAML, indented two spaces).
fn resumed_scaler(generation: i64, algorithm: Option<&str>, status: &str) -> String {
    let algorithm = algorithm.unwrap_or(
        "proportional:
      metric: QueueDepth
      tolerance: \"0.01\"
      roleTargets:
        - name: server
          target: \"10\"",
    );
    format!(
        "apiVersion: worker.gpustack.ai/v1
kind: ModelDeploymentScaler
metadata:
  name: llm
  uid: 11aa-scaler-uid
  generation: {generation}
spec:
  targetRef:
    name: llm
  mode: Active
  sampling:
    pendingTimeoutSeconds: 120
  roles:
    - name: server
      minReplicas: 1
      maxReplicas: 16
  algorithm:
    {algorithm}
status:
{status}"
    )
}

/// Conditions as the suspend pass wrote them.
const SUSPENDED: &str = "  conditions:
    - {type: Bound, status: \"False\", reason: Suspended, message: suspended, observedGeneration: 1, lastTransitionTime: \"2025-12-31T23:50:00Z\"}
    - {type: Active, status: \"False\", reason: Suspended, message: suspended, observedGeneration: 1, lastTransitionTime: \"2025-12-31T23:50:00Z\"}
";

/// Conditions as a pass that committed wrote them (the last status before a suspension whose
/// own status write never landed).
const ACTIVE: &str = "  conditions:
    - {type: Bound, status: \"True\", reason: Bound, message: bound, observedGeneration: 1, lastTransitionTime: \"2025-12-31T23:50:00Z\"}
    - {type: Active, status: \"True\", reason: Active, message: active, observedGeneration: 1, lastTransitionTime: \"2025-12-31T23:50:00Z\"}
";

/// Runs `mds replay --json` on the files; the passes.
fn replay_json(scaler: &str, target: &str, timeline: &str) -> Vec<serde_json::Value> {
    let scratch = Scratch::new("replay-resume");
    let scaler = scratch.file("scaler.yaml", scaler);
    let target = scratch.file("target.yaml", target);
    let timeline = scratch.file("t.jsonl", timeline);
    let out = mds(
        &[
            "replay",
            "--scaler",
            &scaler,
            "--target",
            &target,
            "--timeline",
            &timeline,
            "--json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// Passes every 15 s from 0 to `last`, the server role at `ready` ready replicas with
/// `running` running requests; `first` extra fields on the first line.
fn server_timeline(last: i64, ready: i32, running: i32, first: &str) -> String {
    (0..=last / 15)
        .map(|i| {
            let extra = if i == 0 { first } else { "" };
            format!(
                "{{\"t\": {}, \"roles\": {{\"server\": {{\"readyReplicas\": {ready}, \"runningRequests\": {running}, \"waitingRequests\": 0}}}}{extra}}}\n",
                i * 15
            )
        })
        .collect()
}

fn write_of(pass: &serde_json::Value) -> (String, i64) {
    (
        pass["write"]["kind"].as_str().unwrap_or("").to_string(),
        pass["write"]["term"].as_i64().unwrap_or(0),
    )
}

#[test]
fn a_resumed_scaler_binds_one_above_the_term_its_status_records_for_the_target() {
    let status =
        format!("  binding: {{targetUID: 7f0c-target-uid, targetName: llm, term: 2}}\n{SUSPENDED}");
    let passes = replay_json(
        &resumed_scaler(1, None, &status),
        &server_target(2),
        &server_timeline(15, 2, 40, ""),
    );
    assert_eq!(write_of(&passes[0]), ("bind".into(), 3), "{}", passes[0]);
    assert_eq!(write_of(&passes[1]), ("commit".into(), 3), "{}", passes[1]);
    let id = passes[1]["write"]["decisionID"].as_str().unwrap();
    assert!(id.starts_with("llm-t3-"), "{id}");
}

#[test]
fn a_status_for_another_target_uid_raises_no_term() {
    // The status names the target this name had before it was recreated.
    let status = "  binding: {targetUID: 0ld0-target-uid, targetName: llm, term: 2}
  conditions:
    - {type: Bound, status: \"False\", reason: TargetReplaced, message: replaced, observedGeneration: 1, lastTransitionTime: \"2025-12-31T23:50:00Z\"}
";
    let timeline = server_timeline(15, 2, 20, "");
    // Until a spec edit acknowledges the replacement, nothing binds.
    let passes = replay_json(
        &resumed_scaler(1, None, status),
        &server_target(2),
        &timeline,
    );
    assert!(passes.iter().all(|p| p["write"].is_null()), "{passes:?}");
    assert_eq!(passes[0]["conditions"]["Bound"]["reason"], "TargetReplaced");
    // Acknowledged (generation 2): the old target's term does not count.
    let passes = replay_json(
        &resumed_scaler(2, None, status),
        &server_target(2),
        &timeline,
    );
    assert_eq!(write_of(&passes[0]), ("bind".into(), 1), "{}", passes[0]);
}

/// A status written when the scaler was suspended while a scale-up 2 -> 4 (term 2) waited
/// for admission; committed at 2025-12-31T23:59:00Z, a minute before the replay starts.
fn pending_status(conditions: &str) -> String {
    format!(
        "  binding: {{targetUID: 7f0c-target-uid, targetName: llm, term: 2}}
  lastCommit:
    decisionID: llm-t2-1767225540000
    term: 2
    vector: {{server: 4}}
    baselineVector: {{server: 2}}
    timestamp: \"2025-12-31T23:59:00Z\"
    targetGeneration: 4
  pendingCohort:
    decisionID: llm-t2-1767225540000
    term: 2
    baselineVector: {{server: 2}}
    targetVector: {{server: 4}}
    startedAt: \"2025-12-31T23:59:00Z\"
{conditions}"
    )
}

#[test]
fn a_pending_cohort_in_status_rebinds_and_rolls_back_on_time() {
    for conditions in [SUSPENDED, ACTIVE] {
        // The target still shows the cohort's vector; ordinals 2 and 3 are never admitted.
        let passes = replay_json(
            &resumed_scaler(1, None, &pending_status(conditions)),
            &server_target(4),
            &server_timeline(
                120,
                2,
                40,
                ", \"target\": {\"unadmitted\": {\"server\": [2, 3]}}",
            ),
        );
        assert_eq!(write_of(&passes[0]), ("bind".into(), 3), "{}", passes[0]);
        // 120 s after 23:59:00 is t=60; the first pass past it rolls back under the new term.
        let (at, rollback) = passes
            .iter()
            .find(|p| !p["write"].is_null() && p["write"]["kind"] != "bind")
            .map(|p| (p["t"].as_f64().unwrap(), p))
            .expect("a rollback");
        assert_eq!(at, 75.0, "{rollback}");
        assert_eq!(write_of(rollback), ("rollback".into(), 3), "{rollback}");
        assert_eq!(rollback["write"]["vector"]["server"], 2);
    }
}

#[test]
fn a_pending_cohort_in_status_is_dropped_after_an_external_change() {
    for conditions in [SUSPENDED, ACTIVE] {
        // While unbound, the user set 3 (generation 5, past the commit's 4).
        let target = server_target(3).replace("generation: 4", "generation: 5");
        let passes = replay_json(
            &resumed_scaler(1, None, &pending_status(conditions)),
            &target,
            &server_timeline(
                300,
                3,
                30,
                ", \"target\": {\"unadmitted\": {\"server\": [2]}}",
            ),
        );
        assert_eq!(write_of(&passes[0]), ("bind".into(), 3), "{}", passes[0]);
        let events = passes[0]["events"].to_string();
        assert!(events.contains("RecordsDropped"), "{conditions}: {events}");
        for pass in &passes[1..] {
            assert!(
                pass["write"].is_null(),
                "no rollback of the old cohort: {pass}"
            );
        }
    }
}

#[test]
fn a_predictor_in_status_past_min_points_does_not_warm_up_again() {
    let algorithm = "predictive:
      minPoints: 6
      serverTokenCapacityPerReplica: \"100\"
      tokenThroughput:
        serverTargetTokensPerSecond: \"100\"";
    let history: String = (0..10)
        .map(|i| {
            format!(
                "        - {{timestamp: \"2025-12-31T23:5{}:{:02}Z\", tokensPerSecond: \"200\"}}\n",
                7 + i * 15 / 60,
                (i * 15) % 60
            )
        })
        .collect();
    let status = format!(
        "  binding: {{targetUID: 7f0c-target-uid, targetName: llm, term: 1}}
  roles:
    - {{name: server, currentReplicas: 2}}
  predictors:
    - name: server
      level: \"200\"
      trend: \"0\"
      covariance: {{p00: \"1\", p01: \"0\", p10: \"0\", p11: \"1\"}}
      sampleCount: 10
      history:
{history}{SUSPENDED}"
    );
    let timeline: String = (0..4)
        .map(|i| format!("{{\"t\": {}, \"roles\": {{\"server\": {{\"readyReplicas\": 2, \"promptTokensPerSecond\": 150, \"generationTokensPerSecond\": 50}}}}}}\n", i * 15))
        .collect();
    let passes = replay_json(
        &resumed_scaler(1, Some(algorithm), &status),
        &server_target(2),
        &timeline,
    );
    for pass in &passes {
        assert_ne!(
            pass["roles"]["server"]["reason"], "PredictorWarmingUp",
            "{pass}"
        );
    }
}

#[test]
fn a_status_that_cannot_be_read_is_refused_naming_the_field() {
    let status = "  pendingCohort:\n    decisionID: x\n    term: two\n";
    let scratch = Scratch::new("replay-bad-status");
    let scaler = scratch.file("scaler.yaml", &resumed_scaler(1, None, status));
    let target = scratch.file("target.yaml", &server_target(2));
    let timeline = scratch.file("t.jsonl", &server_timeline(0, 2, 20, ""));
    let out = mds(
        &[
            "replay",
            "--scaler",
            &scaler,
            "--target",
            &target,
            "--timeline",
            &timeline,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("its status cannot be read"), "{stderr}");
    assert!(stderr.contains("status.pendingCohort.term"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A Proportional scaler (10 running requests per replica) of `roles`, shrinking after 15 s,
/// `pendingTimeoutSeconds: 60`, with `extra` spec lines (indented two spaces).
fn quick_scaler(roles: &[&str], extra: &str) -> String {
    let bounds: String = roles
        .iter()
        .map(|r| format!("    - {{name: {r}, minReplicas: 1, maxReplicas: 8}}\n"))
        .collect();
    let targets: String = roles
        .iter()
        .map(|r| format!("        - {{name: {r}, target: \"10\"}}\n"))
        .collect();
    format!(
        "apiVersion: worker.gpustack.ai/v1
kind: ModelDeploymentScaler
metadata:
  name: llm
spec:
  targetRef:
    name: llm
  mode: Active
  sampling:
    pendingTimeoutSeconds: 60
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 15
{extra}  roles:
{bounds}  algorithm:
    proportional:
      metric: QueueDepth
      tolerance: \"0.01\"
      roleTargets:
{targets}"
    )
}

/// Issue 15 item 5: a Pod left Terminating after its retirement (a lost node) does not hold the
/// next scale-down.
#[test]
fn a_pod_left_terminating_after_its_retirement_does_not_hold_scale_down() {
    let line = |t: i64, ready: i32, running: i32, target: &str| {
        format!(
            "{{\"t\": {t}, \"roles\": {{\"server\": {{\"readyReplicas\": {ready}, \"runningRequests\": {running}, \"waitingRequests\": 0}}}}{target}}}\n"
        )
    };
    let mut timeline = line(0, 4, 30, "") + &line(15, 4, 30, "");
    timeline += &line(
        30,
        3,
        20,
        ", \"target\": {\"retirement\": {\"role\": \"server\", \"ordinal\": 3, \"state\": \"Draining\"}}",
    );
    timeline += &line(
        45,
        3,
        20,
        ", \"target\": {\"retirement\": {\"role\": \"server\", \"ordinal\": 3, \"state\": \"Deleting\"}}",
    );
    timeline += &line(
        60,
        3,
        20,
        ", \"target\": {\"retirement\": null, \"terminating\": {\"server\": [3]}}",
    );
    let passes = replay_json(&quick_scaler(&["server"], ""), &server_target(4), &timeline);
    assert_eq!(passes[1]["write"]["vector"]["server"], 3, "{}", passes[1]);
    for pass in &passes[2..4] {
        assert!(pass["write"].is_null(), "the retirement holds: {pass}");
    }
    assert_eq!(
        passes[4]["write"]["vector"]["server"], 2,
        "the Terminating Pod of server/3 holds nothing: {}",
        passes[4]
    );
}

/// Issue 15 item 5: a donor whose retirement never finishes does not hold the rebalance
/// transaction for ever: at the retirement budget (300 s) plus pendingTimeoutSeconds after
/// the release it gives up with RebalanceBlocked, and the receiver's growth plans as usual.
#[test]
fn a_donor_stuck_in_its_retirement_gives_up_with_rebalance_blocked() {
    let target = "apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: llm, uid: 7f0c-target-uid, generation: 4}
spec:
  engine: {name: vLLM}
  router: {name: vllm-router}
  roles:
    - {name: prefill, kind: Server, replicas: 4, instanceType: h100}
    - {name: decode, kind: Server, replicas: 2, instanceType: h100}
";
    let timeline: String = (0..=32)
        .map(|i| {
            let t = i * 15;
            let prefill = if t < 90 { 40 } else { 30 };
            let decode = if t < 15 { 20 } else { 30 };
            let change = match t {
                15 => ", \"target\": {\"unadmitted\": {\"decode\": [2]}}",
                120 => ", \"target\": {\"retirement\": {\"role\": \"prefill\", \"ordinal\": 3, \"state\": \"Draining\"}}",
                150 => ", \"target\": {\"retirement\": {\"role\": \"prefill\", \"ordinal\": 3, \"state\": \"Deleting\"}}",
                _ => "",
            };
            format!("{{\"t\": {t}, \"roles\": {{\"prefill\": {{\"readyReplicas\": 4, \"runningRequests\": {prefill}, \"waitingRequests\": 0}}, \"decode\": {{\"readyReplicas\": 2, \"runningRequests\": {decode}, \"waitingRequests\": 0}}}}{change}}}\n")
        })
        .collect();
    let scaler = quick_scaler(
        &["prefill", "decode"],
        "  rebalance:\n    policy: Opposing\n",
    );
    let passes = replay_json(&scaler, target, &timeline);
    let at = |t: f64| passes.iter().find(|p| p["t"] == t).expect("a pass");
    assert_eq!(at(90.0)["write"]["kind"], "rollback");
    assert_eq!(
        at(105.0)["write"]["vector"]["prefill"],
        3,
        "the donor releases"
    );
    for pass in passes
        .iter()
        .filter(|p| (120.0..465.0).contains(&p["t"].as_f64().unwrap()))
    {
        assert!(pass["write"].is_null(), "the receiver waits: {pass}");
    }
    let gave_up = at(465.0);
    assert_eq!(
        gave_up["conditions"]["Blocked"]["reason"],
        "RebalanceBlocked"
    );
    assert!(
        gave_up["events"].as_array().unwrap().iter().any(|e| e
            .as_str()
            .unwrap()
            .starts_with("RebalanceBlocked: gave up waiting for the retirement of prefill/3")),
        "{gave_up}"
    );
    assert_eq!(
        gave_up["write"]["vector"]["decode"], 3,
        "nothing holds the receiver's growth any more: {gave_up}"
    );
}
