//! Wording helpers for messages about user input: "did you mean" for a misspelt name, and
//! lists written the way a sentence says them ("a, b or c"). Shared by admission findings, the
//! CLI and replay so every command words these the same.

/// The known name closest to `word`, when it is a likely misspelling: the same letters in
/// another case, or at most one edit away (two for words longer than four letters).
pub fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_lowercase();
    let allowed = if word.chars().count() > 4 { 2 } else { 1 };
    let known: Vec<&'a str> = known.into_iter().filter(|k| *k != word).collect();
    let near = known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_lowercase()), *k))
        .filter(|(d, _)| *d <= allowed)
        .min()
        .map(|(_, k)| k);
    near.or_else(|| abbreviated(&lower, &known))
}

/// The one known name `word` abbreviates (`horizonSecs` for `horizonSeconds`): the known name
/// starts with the word less a trailing plural `s`, at least five letters of it.
fn abbreviated<'a>(lower: &str, known: &[&'a str]) -> Option<&'a str> {
    let stem = lower.strip_suffix('s').unwrap_or(lower);
    if stem.chars().count() < 5 {
        return None;
    }
    let mut matches = known.iter().filter(|k| k.to_lowercase().starts_with(stem));
    match (matches.next(), matches.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// `a`, `a or b`, `a, b or c`.
pub fn or_list<S: AsRef<str>>(items: &[S]) -> String {
    joined(items, "or")
}

/// `a`, `a and b`, `a, b and c`.
pub fn and_list<S: AsRef<str>>(items: &[S]) -> String {
    joined(items, "and")
}

fn joined<S: AsRef<str>>(items: &[S], last: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_string(),
        [init @ .., tail] => {
            let init: Vec<&str> = init.iter().map(AsRef::as_ref).collect();
            format!("{} {last} {}", init.join(", "), tail.as_ref())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_misses_only() {
        let spec_fields = ["targetRef", "mode", "suspend", "sampling", "roles"];
        assert_eq!(closest("mod", spec_fields), Some("mode"));
        assert_eq!(closest("MODE", spec_fields), Some("mode"));
        assert_eq!(closest("sampleing", spec_fields), Some("sampling"));
        assert_eq!(closest("rolez", spec_fields), Some("roles"));
        assert_eq!(closest("replicas", spec_fields), None);
        assert_eq!(closest("x", spec_fields), None);
        assert_eq!(
            closest("mode", spec_fields),
            None,
            "a known name is no typo"
        );
        assert_eq!(closest("prefil", ["decode", "prefill"]), Some("prefill"));
        let predictive = ["horizonSeconds", "qLevel", "qTrend", "measurementNoise"];
        assert_eq!(closest("horizonSecs", predictive), Some("horizonSeconds"));
        assert_eq!(closest("horizon", predictive), Some("horizonSeconds"));
        // An abbreviation of two names, or of under five letters, suggests nothing.
        assert_eq!(closest("qLev", predictive), None);
        assert_eq!(
            closest("stableWin", ["stableWindowSeconds", "stableWindowX"]),
            None
        );
    }

    #[test]
    fn lists_read_as_sentences() {
        assert_eq!(or_list::<&str>(&[]), "");
        assert_eq!(or_list(&["Pods"]), "Pods");
        assert_eq!(or_list(&["Pods", "Percent"]), "Pods or Percent");
        assert_eq!(and_list(&["a", "b", "c"]), "a, b and c");
    }
}
