//! A TTFT objective per prompt class: "500 ms for chat, 2 s for prompts of 4k tokens and more"
//! is `--slo-ttft 500ms,4k=2s`. A linear allowance cannot say it (it gives a 2k-token chat
//! prompt 700 ms); classes by prompt length can, each with its own base and allowance.

use serde::{Serialize, Serializer};

/// The most classes one objective takes besides its base.
pub const MAX_CLASSES: usize = 4;

/// Prompts of at least `from_prompt_tokens` tokens: their TTFT objective.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TtftClass {
    pub from_prompt_tokens: u32,
    pub seconds: f64,
    /// Seconds the objective grows per 1,000 prompt tokens.
    #[serde(skip_serializing_if = "super::is_zero")]
    pub per_1k_prompt_seconds: f64,
}

/// The classes above the base, in ascending prompt length (kept `Copy`, as the SLO is).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct TtftClasses {
    classes: [Option<TtftClass>; MAX_CLASSES],
}

impl Serialize for TtftClasses {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl TtftClasses {
    pub fn is_empty(&self) -> bool {
        self.classes[0].is_none()
    }

    pub fn iter(&self) -> impl Iterator<Item = &TtftClass> {
        self.classes.iter().flatten()
    }

    /// The class a prompt of `prompt` tokens falls in: the longest threshold it reaches.
    pub fn of(&self, prompt: f64) -> Option<&TtftClass> {
        self.iter()
            .filter(|c| prompt >= f64::from(c.from_prompt_tokens))
            .last()
    }

    /// `4k=2s`, `16000=5s+100ms/1k`, ... (the items after `--slo-ttft`'s base); thresholds
    /// ascending, each above the one before.
    pub fn parse(items: &[&str]) -> Result<TtftClasses, String> {
        if items.len() > MAX_CLASSES {
            return Err(format!(
                "at most {MAX_CLASSES} prompt classes follow the base, as in 500ms,4k=2s"
            ));
        }
        let mut out = TtftClasses::default();
        let mut last = 0;
        for (slot, item) in out.classes.iter_mut().zip(items) {
            let Some((from, objective)) = item.split_once('=') else {
                return Err(format!(
                    "{item:?}: a prompt class is TOKENS=TIME, as in 4k=2s (prompts of 4,000 tokens and more get 2 s)"
                ));
            };
            let from = prompt_tokens(from.trim())
                .ok_or_else(|| format!("{from:?}: a prompt length is tokens, as 4000 or 4k"))?;
            if from <= last {
                return Err(format!(
                    "{item:?}: prompt classes go from shorter to longer prompts, each threshold above the one before"
                ));
            }
            last = from;
            let (seconds, per_1k) =
                super::Slo::parse_ttft(objective).map_err(|rule| format!("{item:?}: {rule}"))?;
            *slot = Some(TtftClass {
                from_prompt_tokens: from,
                seconds,
                per_1k_prompt_seconds: per_1k,
            });
        }
        Ok(out)
    }
}

/// `4000` or `4k` (thousands, as the allowance's `/1k`), above 0.
fn prompt_tokens(text: &str) -> Option<u32> {
    let (number, scale) = match text.strip_suffix(['k', 'K']) {
        Some(n) => (n, 1000.0),
        None => (text, 1.0),
    };
    let tokens = number.parse::<f64>().ok()? * scale;
    (tokens.is_finite() && tokens >= 1.0 && tokens <= f64::from(u32::MAX) && tokens.fract() == 0.0)
        .then_some(tokens as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_prompt_falls_in_the_longest_class_it_reaches() {
        let classes = TtftClasses::parse(&["4k=2s", "16000=5s+100ms/1k"]).unwrap();
        assert_eq!(classes.of(3999.0), None);
        assert_eq!(classes.of(4000.0).map(|c| c.seconds), Some(2.0));
        let long = classes.of(20_000.0).unwrap();
        assert_eq!((long.seconds, long.per_1k_prompt_seconds), (5.0, 0.1));
    }

    #[test]
    fn a_bad_class_is_named_with_the_rule_it_broke() {
        for (items, says) in [
            (vec!["4k"], "a prompt class is TOKENS=TIME"),
            (vec!["four=2s"], "a prompt length is tokens"),
            (vec!["4k=2"], "did you mean 2s?"),
            (vec!["8k=2s", "4k=1s"], "from shorter to longer prompts"),
            (vec!["1k=1s"; 5], "at most 4 prompt classes"),
        ] {
            let err = TtftClasses::parse(&items).unwrap_err();
            assert!(err.contains(says), "{items:?}: {err}");
        }
    }
}

#[cfg(test)]
mod objective_tests {
    use super::super::Slo;

    #[test]
    fn a_request_is_held_to_its_prompt_classes_objective_and_the_header_says_so() {
        let ((base, per_1k), ttft_classes) = Slo::parse_ttft_classes("500ms,4k=2s").unwrap();
        let slo = Slo {
            ttft_seconds: base,
            ttft_per_1k_prompt_seconds: per_1k,
            ttft_classes,
            ..Slo::default()
        };
        // A 2k-token chat prompt keeps 500 ms (a linear allowance would give it 700 ms).
        assert_eq!(slo.ttft_objective(2000.0, 0.1), 0.5);
        assert_eq!(slo.ttft_objective(4000.0, 0.1), 2.0);
        assert_eq!(
            slo.describe(),
            "TTFT <= 500 ms, 2000 ms from 4000 prompt tokens and its p95 inter-token gap <= 50 ms"
        );
        let json = serde_json::to_value(slo).unwrap();
        assert_eq!(
            json["ttft_classes"],
            serde_json::json!([{"from_prompt_tokens": 4000, "seconds": 2.0}])
        );
        let plain = serde_json::to_value(Slo::default()).unwrap();
        assert!(plain.get("ttft_classes").is_none(), "{plain}");
    }
}
