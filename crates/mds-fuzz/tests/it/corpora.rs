//! `fuzz/corpus/<target>/*` through [`mds_fuzz::TARGETS`].

use std::path::PathBuf;

fn corpus(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

#[test]
fn every_target_has_a_seeded_corpus_and_a_fuzz_target_file() {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for (name, _) in mds_fuzz::TARGETS {
        let inputs = std::fs::read_dir(corpus(name))
            .unwrap_or_else(|e| panic!("fuzz/corpus/{name}: {e}"))
            .count();
        assert!(inputs > 0, "fuzz/corpus/{name} is empty");
        let target = fuzz.join("fuzz_targets").join(format!("{name}.rs"));
        assert!(target.is_file(), "{} is missing", target.display());
    }
}

#[test]
fn every_stored_input_passes_its_targets_oracles() {
    for (name, body) in mds_fuzz::TARGETS {
        let mut files: Vec<PathBuf> = std::fs::read_dir(corpus(name))
            .unwrap_or_else(|e| panic!("fuzz/corpus/{name}: {e}"))
            .map(|entry| entry.unwrap().path())
            .collect();
        files.sort();
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(
                outcome.is_ok(),
                "{name}: {} breaks an oracle",
                file.display()
            );
        }
    }
}

#[test]
fn every_syntax_reader_has_a_seed() {
    let mut seeded = vec![false; mds_fuzz::syntax::READERS.len()];
    for entry in std::fs::read_dir(corpus("syntax")).unwrap() {
        let path = entry.unwrap().path();
        let seed = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("seed-");
        if let (true, Some(&pick)) = (seed, std::fs::read(&path).unwrap().first()) {
            seeded[usize::from(pick) % mds_fuzz::syntax::READERS.len()] = true;
        }
    }
    for ((name, _), seeded) in mds_fuzz::syntax::READERS.iter().zip(seeded) {
        assert!(seeded, "no seed-* input in fuzz/corpus/syntax picks {name}");
    }
}
