//! `mds simulate --peer FILE`: a team's own autoscalers (an HPA, a KEDA ScaledObject, a
//! Knative Service or an AIBrix PodAutoscaler), read as written and run beside ours, each named
//! after its file (docs/simulator.md, "Your own autoscaler as a peer").

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mds_api::target::ModelDeployment;
use mds_simulate::peers::file::PeerFile;
use mds_simulate::roster::PeerName;

use super::inputs::{Stop, documents, unusable};
use super::simulate_compare::OURS;

/// Reads every `--peer` file: one autoscaler each, named after the file (its name with the
/// extension when the stem is a built-in policy's name). What each runs as, and where the run
/// differs from upstream, goes to `notes`.
pub fn read(
    paths: &[PathBuf],
    target: &ModelDeployment,
    notes: &mut String,
) -> Result<Vec<Arc<PeerFile>>, Stop> {
    let mut taken: BTreeSet<String> = std::iter::once("mds")
        .chain(OURS)
        .chain(PeerName::ALL.iter().map(|p| p.as_str()))
        .map(str::to_string)
        .collect();
    let mut out = Vec::new();
    for path in paths {
        let file = path.display().to_string();
        let docs = documents(path)?;
        let [doc] = docs.as_slice() else {
            return Err(unusable(format!(
                "--peer {file}: holds {} documents; give one autoscaler per file",
                docs.len()
            )));
        };
        let value = serde_json::to_value(&doc.value)
            .map_err(|e| unusable(format!("--peer {file}: cannot be read as an object: {e}")))?;
        let peer = PeerFile::read(&row_name(path, &mut taken), &value)
            .map_err(|e| unusable(format!("--peer {file}: {e}")))?;
        notes.push_str(&super::note_line(&format!(
            "--peer {file}: {} runs as the row {:?}: {}",
            peer.object, peer.name, peer.summary
        )));
        for note in &peer.notes {
            notes.push_str(&super::note_line(&format!("--peer {file}: {note}")));
        }
        if target.spec.roles.len() > 1 {
            notes.push_str(&super::note_line(&format!(
                "--peer {file}: the target has {} roles; the policy runs on each role on its own, as one autoscaler per role would",
                target.spec.roles.len()
            )));
        }
        out.push(Arc::new(peer));
    }
    Ok(out)
}

/// The file's stem, unless a policy already has that name: then its file name, then with a
/// number.
fn row_name(path: &Path, taken: &mut BTreeSet<String>) -> String {
    let stem = path
        .file_stem()
        .map_or("peer".into(), |s| s.to_string_lossy().into_owned());
    let file_name = path
        .file_name()
        .map_or(stem.clone(), |s| s.to_string_lossy().into_owned());
    let name = [stem, file_name.clone()]
        .into_iter()
        .chain((2..).map(|n| format!("{file_name}-{n}")))
        .find(|n| !taken.contains(n))
        .unwrap_or(file_name);
    taken.insert(name.clone());
    name
}
