//! `mds validate` without a terminal: inputs in, report and outcome out.

use super::*;
use proptest::prelude::*;

struct Run {
    outcome: Outcome,
    out: String,
    err: String,
}

fn input(name: &str, text: &str, scalers: bool, targets: bool) -> Input {
    Input {
        name: name.to_string(),
        bytes: Ok(text.as_bytes().to_vec()),
        scalers,
        targets,
    }
}

fn run_with(inputs: &[Input], options: Options) -> Run {
    let (mut out, mut err) = (String::new(), String::new());
    let outcome = check_inputs(inputs, options, &mut out, &mut err);
    Run { outcome, out, err }
}

/// Scaler files (with -f) and target files (with --target).
fn run_on(files: &[(&str, &str)], targets: &[(&str, &str)]) -> Run {
    let inputs: Vec<Input> = files
        .iter()
        .map(|(n, t)| input(n, t, true, false))
        .chain(targets.iter().map(|(n, t)| input(n, t, false, true)))
        .collect();
    run_with(&inputs, Options::default())
}

const SCALER: &str = "apiVersion: worker.gpustack.ai/v1
kind: ModelDeploymentScaler
metadata:
  name: s
spec:
  targetRef:
    name: md
  roles:
    - name: server
      maxReplicas: 4
  algorithm:
    proportional:
      metric: QueueDepth
      roleTargets:
        - name: server
          target: \"8\"
";

const TARGET: &str = "apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata:
  name: md
spec:
  engine: {name: vLLM}
  roles:
    - name: server
";

#[test]
fn type_errors_are_in_the_users_words() {
    let text = SCALER.replace("maxReplicas: 4", "maxReplicas: many");
    let r = run_on(&[("a.yaml", &text)], &[]);
    assert_eq!(r.outcome, Outcome::Invalid);
    assert!(
        r.out.contains(
            "  spec.roles[0].maxReplicas: \"many\" is not a whole number from 1 to 1024\n"
        ),
        "{}",
        r.out
    );
    let text = SCALER.replace("metric: QueueDepth", "metric: Queue");
    let r = run_on(&[("a.yaml", &text)], &[]);
    assert!(
        r.out.contains("spec.algorithm.proportional.metric: \"Queue\" is not one of QueueDepth, RunningRequests, WaitingRequests, PromptTokensPerSecond, GenerationTokensPerSecond or TotalTokensPerSecond"),
        "{}",
        r.out
    );
    let text = SCALER.replace("  targetRef:", "  mode: active\n  targetRef:");
    let r = run_on(&[("a.yaml", &text)], &[]);
    assert!(
        r.out
            .contains("spec.mode: \"active\" is not one of Shadow or Active; did you mean Active?"),
        "{}",
        r.out
    );
    let text = format!("{SCALER}  behavior:\n    scaleUp:\n      stepPolicy: {{type: Pods}}\n");
    let r = run_on(&[("a.yaml", &text)], &[]);
    assert!(
        r.out.contains(
            "spec.behavior.scaleUp.stepPolicy.value: is required; give a whole number, 0 or more"
        ),
        "{}",
        r.out
    );
    let text = SCALER.replace("target: \"8\"", "target: 0.5");
    let r = run_on(&[("a.yaml", &text)], &[]);
    assert!(r.out.contains("quote it as a string"), "{}", r.out);
    for rust_word in ["i32", "u32", "struct", "variant", "Option", "sequence"] {
        assert!(!r.out.contains(rust_word), "{rust_word} in {}", r.out);
    }
}

#[test]
fn out_of_range_integers_are_rule_errors_naming_the_range() {
    for huge in [
        "99999999999999999999",
        "3000000000",
        "-99999999999999999999",
        "1e40",
    ] {
        let text = SCALER.replace("maxReplicas: 4", &format!("maxReplicas: {huge}"));
        let r = run_on(&[("a.yaml", &text)], &[]);
        assert_eq!(r.outcome, Outcome::Invalid, "{huge}: {}{}", r.out, r.err);
        let expected = format!(
            "  spec.roles[0].maxReplicas: {huge} is out of range; allowed is a whole number from 1 to 1024\n"
        );
        assert!(r.out.contains(&expected), "{huge}: {}", r.out);
        assert!(
            !r.out.contains("is required"),
            "no contradicting pair: {}",
            r.out
        );
        assert!(
            r.out.contains("ModelDeploymentScaler s: invalid"),
            "{}",
            r.out
        );
    }
}

#[test]
fn type_errors_rules_and_unknown_fields_are_reported_together() {
    let text = SCALER
        .replace(
            "maxReplicas: 4",
            "maxReplicas: many\n      minReplicas: 2000",
        )
        .replace("metric: QueueDepth", "metric: Queue")
        .replace(
            "  targetRef:",
            "  mode: active\n  sampling: {intervalSeconds: 1}\n  mod: Active\n  targetRef:",
        );
    let r = run_on(&[("a.yaml", &text)], &[]);
    assert_eq!(r.outcome, Outcome::Invalid);
    for line in [
        "a.yaml: document 1: ModelDeploymentScaler s: invalid",
        "  spec.mode: \"active\" is not one of Shadow or Active",
        "  spec.roles[0].maxReplicas: \"many\" is not a whole number",
        "  spec.algorithm.proportional.metric: \"Queue\" is not one of",
        "  spec.sampling.intervalSeconds: 1 is out of range; allowed is 5 to 300",
        "  spec.roles[0].minReplicas: 2000 is out of range",
        "  warning: spec.mod: is not a field of ModelDeploymentScaler and is dropped by the API server; did you mean mode?",
    ] {
        assert!(r.out.contains(line), "missing {line:?} in\n{}", r.out);
    }
    // The stand-in for maxReplicas never shows up as a finding of its own.
    assert!(!r.out.contains("greater than maxReplicas"), "{}", r.out);
    let text = SCALER.replace("metadata:\n  name: s\n", "");
    let r = run_on(&[("a.yaml", &text)], &[]);
    assert!(
        r.out
            .contains("  metadata: is required; give a mapping of fields"),
        "{}",
        r.out
    );
    assert!(
        !r.out.contains("metadata.name"),
        "one finding per cause: {}",
        r.out
    );
}

#[test]
fn unknown_fields_have_plain_paths_and_suggestions() {
    let text = SCALER
        .replace("maxReplicas: 4", "maxReplicas: 4\n      maxReplica: 5")
        .replace(
            "      metric: QueueDepth",
            "      metric: QueueDepth\n      tolerence: \"0.2\"",
        );
    let r = run_on(&[("a.yaml", &text)], &[]);
    assert_eq!(r.outcome, Outcome::Valid, "{}", r.out);
    assert!(r.out.contains("warning: spec.roles[0].maxReplica: is not a field of ModelDeploymentScaler and is dropped by the API server; did you mean maxReplicas?"), "{}", r.out);
    assert!(
        r.out
            .contains("warning: spec.algorithm.proportional.tolerence: "),
        "{}",
        r.out
    );
    assert!(r.out.contains("did you mean tolerance?"), "{}", r.out);
    assert!(!r.out.contains('?') || !r.out.contains(".?."), "{}", r.out);
    let strict = run_with(
        &[input("a.yaml", &text, true, false)],
        Options {
            strict: true,
            ..Options::default()
        },
    );
    assert_eq!(
        strict.outcome,
        Outcome::Invalid,
        "--strict fails on warnings"
    );
    assert!(strict.out.contains(": invalid ("), "{}", strict.out);
    assert!(strict.out.contains("--strict"), "{}", strict.out);
}

#[test]
fn targets_enable_target_rules() {
    let two_roles = TARGET.replace(
        "    - name: server\n",
        "    - name: server\n    - name: extra\n",
    );
    let r = run_on(&[("a.yaml", SCALER)], &[("t.yaml", &two_roles)]);
    assert_eq!(r.outcome, Outcome::Invalid);
    assert!(
        r.out.contains("checked against ModelDeployment \"md\""),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("spec.roles: target role \"extra\""),
        "{}",
        r.out
    );
    // The same pair in one multi-document file given with -f.
    let both = format!("{two_roles}---\n{SCALER}");
    let r = run_on(&[("both.yaml", &both)], &[]);
    assert_eq!(r.outcome, Outcome::Invalid);
    assert!(r.out.contains("checked against"), "{}", r.out);
    // ... and the same file given with -f and --target: the scaler is not lost.
    let r = run_with(&[input("both.yaml", &both, true, true)], Options::default());
    assert!(
        r.out
            .contains("ModelDeploymentScaler s: invalid (checked against"),
        "{}",
        r.out
    );
}

#[test]
fn a_target_flag_that_matches_nothing_is_an_error() {
    let cases = [
        ("other name", TARGET.replace("name: md", "name: other")),
        (
            "other kind",
            TARGET.replace("kind: ModelDeployment", "kind: Deployment"),
        ),
        (
            "other namespace",
            TARGET.replace("name: md", "name: md\n  namespace: staging"),
        ),
    ];
    let scaler = SCALER.replace("name: s\n", "name: s\n  namespace: prod\n");
    for (case, target) in cases {
        let r = run_on(&[("a.yaml", &scaler)], &[("t.yaml", &target)]);
        assert_eq!(r.outcome, Outcome::Invalid, "{case}: {}", r.out);
        assert!(!r.out.contains("no target given"), "{case}: {}", r.out);
        assert!(
            r.out
                .contains("(target not found: target-dependent rules skipped)"),
            "{case}: {}",
            r.out
        );
        assert!(
            r.out.contains("  spec.targetRef.name: no ModelDeployment \"md\" in namespace \"prod\" among the --target files, which hold "),
            "{case}: {}",
            r.out
        );
        let allowed = run_with(
            &[
                input("a.yaml", &scaler, true, false),
                input("t.yaml", &target, false, true),
            ],
            Options {
                allow_missing_target: true,
                ..Options::default()
            },
        );
        assert_eq!(allowed.outcome, Outcome::Valid, "{case}: {}", allowed.out);
        assert!(
            allowed
                .out
                .contains("  warning: spec.targetRef.name: no ModelDeployment"),
            "{}",
            allowed.out
        );
    }
}

#[test]
fn show_defaults_prints_only_yaml_on_stdout() {
    let r = run_with(
        &[input("a.yaml", SCALER, true, false)],
        Options {
            show_defaults: true,
            ..Options::default()
        },
    );
    assert_eq!(r.outcome, Outcome::Valid);
    assert!(
        r.err.contains("ModelDeploymentScaler s: valid"),
        "{}",
        r.err
    );
    let stored = parse_documents("stdout", r.out.as_bytes()).expect("stdout is YAML");
    assert_eq!(stored.len(), 1);
    assert!(stored[0].is("ModelDeploymentScaler"));
    // Stored objects validate again and store the same.
    let again = run_with(
        &[input("stored.yaml", &r.out, true, false)],
        Options {
            show_defaults: true,
            ..Options::default()
        },
    );
    assert_eq!(again.outcome, Outcome::Valid, "{}", again.err);
    assert_eq!(again.out, r.out, "defaulting is idempotent");
}

#[test]
fn invalid_targets_are_reported_in_words() {
    let target = TARGET.replace(
        "    - name: server\n",
        "    - name: server\n      replicas: lots\n",
    );
    let r = run_on(&[("a.yaml", SCALER)], &[("t.yaml", &target)]);
    assert_eq!(r.outcome, Outcome::Invalid);
    assert!(
        r.out.contains("t.yaml: document 1: ModelDeployment \"md\": invalid\n  spec.roles[0].replicas: \"lots\" is not a whole number"),
        "{}",
        r.out
    );
}

#[test]
fn other_kinds_are_skipped_and_empty_input_is_reported() {
    let r = run_on(&[("cm.yaml", "apiVersion: v1\nkind: ConfigMap\n")], &[]);
    assert_eq!(
        r.outcome,
        Outcome::Unreadable,
        "nothing validated is not a pass"
    );
    assert!(r.out.is_empty());
    assert!(
        r.err
            .contains("mds: note: cm.yaml: document 1: skipped: kind \"ConfigMap\""),
        "{}",
        r.err
    );
    assert!(
        r.err
            .contains("mds: error: no ModelDeploymentScaler documents found"),
        "{}",
        r.err
    );
}

#[test]
fn yaml_syntax_errors_are_unreadable_with_a_line() {
    let r = run_on(&[("bad.yaml", "spec:\n  roles: [\n")], &[]);
    assert_eq!(r.outcome, Outcome::Unreadable);
    assert!(r.err.contains("mds: error: bad.yaml: line "), "{}", r.err);
    let r = run_on(&[("list.yaml", "- a\n- b\n")], &[]);
    assert_eq!(r.outcome, Outcome::Unreadable);
    assert!(r.err.contains("expected a mapping"), "{}", r.err);
}

#[test]
fn the_worst_outcome_wins() {
    let invalid = SCALER.replace("maxReplicas: 4", "maxReplicas: 2000");
    let r = run_on(&[("ok.yaml", SCALER), ("bad.yaml", &invalid)], &[]);
    assert_eq!(r.outcome, Outcome::Invalid);
    assert!(
        r.out
            .contains("ok.yaml: document 1: ModelDeploymentScaler s: valid"),
        "{}",
        r.out
    );
    assert!(
        r.out
            .contains("  spec.roles[0].maxReplicas: 2000 is out of range; allowed is 1 to 1024"),
        "{}",
        r.out
    );
    let r = run_on(&[("bad.yaml", &invalid), ("u.yaml", "a: [")], &[]);
    assert_eq!(r.outcome, Outcome::Unreadable);
}

/// Fragments that make random documents likely to reach the deeper parsing paths.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("apiVersion: worker.gpustack.ai/v1\n".to_string()),
        Just("kind: ModelDeploymentScaler\n".to_string()),
        Just("kind: ModelDeployment\n".to_string()),
        Just("metadata: {name: s}\n".to_string()),
        Just("spec:\n  targetRef: {name: md}\n".to_string()),
        Just("  roles: [{name: server, maxReplicas: 4, minReplicas: 9}]\n".to_string()),
        Just("  roles: [7, {name: 5, maxReplicas: 99999999999999999999}]\n".to_string()),
        Just("  ratios: [{numeratorRole: a, denominatorRole: a, min: \"1e400\"}]\n".to_string()),
        Just("  algorithm: {predictive: {qLevel: \"-0\"}}\n".to_string()),
        Just("  behavior: {scaleUp: {stepPolicy: {type: Pod, value: x}}}\n".to_string()),
        Just("  mode: [1]\n".to_string()),
        Just("---\n".to_string()),
        Just("&a [*a]\n".to_string()),
        "[ -~\\n]{0,12}",
    ]
}

proptest! {
    #[test]
    fn never_panics_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let inputs = [Input { name: "fuzz".into(), bytes: Ok(bytes), scalers: true, targets: true }];
        let _ = run_with(&inputs, Options { show_defaults: true, ..Options::default() });
    }

    #[test]
    fn never_panics_on_manifest_like_text(parts in proptest::collection::vec(fragment(), 0..14)) {
        let text = parts.concat();
        let inputs = [input("fuzz", &text, true, false)];
        let r = run_with(&inputs, Options { show_defaults: true, ..Options::default() });
        if r.outcome == Outcome::Unreadable {
            prop_assert!(!r.err.is_empty());
        }
        for rust_word in ["i32", "u32", "i64", "u64", "struct ", "Option<"] {
            prop_assert!(!r.err.contains(rust_word), "{} in {}", rust_word, r.err);
        }
    }
}
