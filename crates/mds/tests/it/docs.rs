//! The docs run as written. Every `mds` command in a shell block of README.md, docs/REPLAY.md,
//! docs/reference.md, docs/gitops.md, docs/lab.md and docs/simulator.md runs with the exit status it claims (0 unless a
//! `# exits N` comment says otherwise), every sample marked `<!-- output: mds ARGS -->` appears
//! in that command's real output, every sample marked `<!-- lines of: FILE -->` is made of lines
//! of FILE, and no doc points outside the repository.
//!
//! A command marked `# runs until Ctrl-C` is a server: `mds lab up` runs with `--dry-run`
//! (its arguments and trace files are checked; tests/it/lab.rs runs the real thing), any other
//! with `--help` (its flags and values must parse). `mds lab kubectl-path` needs the built
//! control plane, so `MDS_SKIP_E2E=1` skips it as it skips the end-to-end tests.

use crate::common;

use std::collections::BTreeMap;

use common::{Scratch, mds, repo, text};

/// The docs whose commands and samples are checked.
const DOCS: [&str; 6] = [
    "README.md",
    "docs/simulator.md",
    "docs/REPLAY.md",
    "docs/reference.md",
    "docs/gitops.md",
    "docs/lab.md",
];

/// Commands a doc may show that are not `mds` and are not run here.
const OTHER_TOOLS: [&str; 7] = [
    "kubectl ",
    "curl ",
    "$KUBECTL ",
    "KUBECTL=",
    "cargo test",
    "cargo install",
    "cargo bench",
];

struct Block {
    doc: &'static str,
    info: String,
    body: String,
    /// The HTML comment on the last non-empty line before the fence, if any.
    marker: Option<String>,
}

fn blocks(doc: &'static str) -> Vec<Block> {
    let markdown = std::fs::read_to_string(repo().join(doc)).unwrap();
    let mut out = Vec::new();
    let mut lines = markdown.lines();
    let mut last_text = "";
    while let Some(line) = lines.next() {
        if let Some(info) = line.strip_prefix("```") {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.starts_with("```"))
                .collect();
            let marker = last_text
                .strip_prefix("<!--")
                .and_then(|m| m.strip_suffix("-->"))
                .map(|m| m.trim().to_string());
            out.push(Block {
                doc,
                info: info.trim().to_string(),
                body: body.join("\n"),
                marker,
            });
            last_text = "";
        } else if !line.trim().is_empty() {
            last_text = line.trim();
        }
    }
    out
}

/// One documented command, split into what the test needs.
struct Invocation {
    args: Vec<String>,
    stdin_file: Option<String>,
    stdout_file: Option<String>,
    exit: i32,
}

/// Parses `[cat FILE |] (mds|cargo run --release --) ARGS [> FILE] [# comment]`; `None` for
/// other tools; panics on anything else, so docs stay runnable.
fn invocation(doc: &str, line: &str) -> Option<Invocation> {
    let (command, comment) = line.split_once('#').unwrap_or((line, ""));
    let exit = comment
        .split_once("exits ")
        .and_then(|(_, n)| n.split_whitespace().next())
        .map_or(0, |n| n.parse().expect("an exit status"));
    let mut words: Vec<&str> = command.split_whitespace().collect();
    if words.is_empty()
        || OTHER_TOOLS
            .iter()
            .any(|t| command.trim_start().starts_with(t))
    {
        return None;
    }
    let mut stdin_file = None;
    if words.first() == Some(&"cat") && words.get(2) == Some(&"|") {
        stdin_file = Some(words[1].to_string());
        words.drain(..3);
    }
    let mut stdout_file = None;
    if let Some(i) = words.iter().position(|w| *w == ">") {
        stdout_file = Some(words[i + 1].to_string());
        words.truncate(i);
    }
    let rest = if words.first() == Some(&"mds") {
        &words[1..]
    } else if words.starts_with(&["cargo", "run", "--release", "--"]) {
        &words[4..]
    } else {
        panic!("{doc}: a shell line the docs test cannot run: {line}");
    };
    assert!(
        !rest.iter().any(|w| w.contains("...") || w.contains('|')),
        "{doc}: run as written: {line}"
    );
    let mut args: Vec<String> = rest.iter().map(|w| w.to_string()).collect();
    if comment.contains("runs until Ctrl-C") {
        args.push(
            if rest.starts_with(&["lab", "up"]) {
                "--dry-run"
            } else {
                "--help"
            }
            .into(),
        );
    }
    if rest.starts_with(&["lab", "kubectl-path"]) && mds_testkit::skip_e2e() {
        return None;
    }
    Some(Invocation {
        args,
        stdin_file,
        stdout_file,
        exit,
    })
}

/// The shell lines of a block, continuation lines joined.
fn shell_lines(body: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut pending = String::new();
    for line in body.lines() {
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            continue;
        }
        pending.push_str(line);
        lines.push(std::mem::take(&mut pending));
    }
    lines
}

#[test]
fn every_documented_command_runs_as_written() {
    let scratch = Scratch::new("docs");
    let mut ran = 0;
    for doc in DOCS {
        // Files a doc writes with `>` land in the scratch directory; later lines read them there.
        let mut written: BTreeMap<String, String> = BTreeMap::new();
        for block in blocks(doc).into_iter().filter(|b| b.info == "sh") {
            for line in shell_lines(&block.body) {
                let Some(call) = invocation(block.doc, &line) else {
                    continue;
                };
                let args: Vec<String> = call
                    .args
                    .iter()
                    .map(|a| written.get(a).cloned().unwrap_or_else(|| a.clone()))
                    .collect();
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let stdin = call.stdin_file.map(|f| {
                    std::fs::read_to_string(repo().join(&f))
                        .unwrap_or_else(|e| panic!("{doc}: {f}: {e}"))
                });
                let out = mds(&args, stdin.as_deref());
                assert_eq!(
                    out.status.code(),
                    Some(call.exit),
                    "{doc}: {line}\n{}{}",
                    text(&out.stdout),
                    text(&out.stderr)
                );
                if let Some(file) = call.stdout_file {
                    let name = file.rsplit('/').next().unwrap().to_string();
                    written.insert(file, scratch.file(&name, &text(&out.stdout)));
                }
                ran += 1;
            }
        }
    }
    assert!(ran >= 15, "the docs show commands: {ran}");
}

#[test]
fn documented_samples_match_real_output() {
    let mut checked = 0;
    for doc in DOCS {
        for block in blocks(doc) {
            let Some(marker) = &block.marker else {
                continue;
            };
            if let Some(command) = marker.strip_prefix("output:") {
                let call = invocation(doc, command.trim()).expect("an mds command");
                let args: Vec<&str> = call.args.iter().map(String::as_str).collect();
                let out = mds(&args, None);
                let output = text(&out.stdout) + &text(&out.stderr);
                assert!(
                    output.contains(block.body.trim_end()),
                    "{doc}: the sample under `{marker}` is not in the real output:\n--- sample\n{}\n--- output\n{output}",
                    block.body
                );
            } else if let Some(file) = marker.strip_prefix("lines of:") {
                let content = std::fs::read_to_string(repo().join(file.trim())).unwrap();
                for line in block.body.lines() {
                    assert!(
                        content.lines().any(|l| l == line),
                        "{doc}: not a line of {file}: {line}"
                    );
                }
            } else {
                panic!("{doc}: unknown sample marker: {marker}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 5, "samples checked: {checked}");
}

#[test]
fn docs_stay_inside_the_repository() {
    for doc in DOCS.iter().chain(&[
        "docs/PERFORMANCE.md",
        "docs/DESIGN.md",
        "docs/SIMULATION.md",
        "docs/operations.md",
        "docs/webhooks.md",
        "docs/testing.md",
    ]) {
        let markdown = std::fs::read_to_string(repo().join(doc)).unwrap();
        for (i, line) in markdown.lines().enumerate() {
            for bad in ["](http", "../shared", "](/"] {
                assert!(
                    !line.contains(bad),
                    "{doc}:{}: points outside the repository: {line}",
                    i + 1
                );
            }
        }
        // Every relative link names a file of the repository.
        for link in markdown.split("](").skip(1) {
            let target = link.split(')').next().unwrap().split('#').next().unwrap();
            if target.is_empty() {
                continue;
            }
            let base = std::path::Path::new(doc).parent().unwrap();
            assert!(
                repo().join(base).join(target).exists(),
                "{doc}: link to a missing file: {target}"
            );
        }
    }
}
