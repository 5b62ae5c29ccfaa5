//! Which series each adapter reads, so the parser can pass over the rest before building
//! anything for them (see [`super::read_text`]).

use super::EngineKind;
use crate::exposition::{Interest, Page, Take};

/// The series an adapter looks at, besides every `_created` mark and
/// `process_start_time_seconds`.
pub(super) struct FamilyList {
    /// What every series below starts with.
    prefix: &'static str,
    /// Series whose values it reads.
    series: &'static [&'static str],
    /// Histogram bases whose `_bucket`, `_sum` and `_count` series it reads.
    histograms: &'static [&'static str],
    /// Series it only notes as ignored when they are on the page.
    noted: &'static [&'static str],
    /// Legacy series read only when their preferred one is absent.
    legacy: &'static [Legacy],
}

/// A legacy name and the name that replaced it.
struct Legacy {
    name: &'static str,
    preferred: &'static str,
    /// Whether both are histogram bases (their parts are the series).
    histogram: bool,
}

const VLLM_FAMILIES: FamilyList = FamilyList {
    prefix: "vllm:",
    series: &[
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:prefix_cache_hits_total",
    ],
    histograms: &[
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
    ],
    noted: &[
        "vllm:num_requests_waiting_by_reason",
        "vllm:prefix_cache_queries_total",
        "vllm:external_prefix_cache_hits_total",
    ],
    legacy: &[
        Legacy {
            name: "vllm:gpu_cache_usage_perc",
            preferred: "vllm:kv_cache_usage_perc",
            histogram: false,
        },
        Legacy {
            name: "vllm:gpu_prefix_cache_hits_total",
            preferred: "vllm:prefix_cache_hits_total",
            histogram: false,
        },
        Legacy {
            name: "vllm:time_per_output_token_seconds",
            preferred: "vllm:inter_token_latency_seconds",
            histogram: true,
        },
    ],
};

const SGLANG_FAMILIES: FamilyList = FamilyList {
    prefix: "sglang:",
    series: &[
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:num_decode_transfer_queue_reqs",
        "sglang:token_usage",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:prefill_effective_tokens_total",
        "sglang:cached_tokens_total",
    ],
    histograms: &[
        "sglang:time_to_first_token_seconds",
        "sglang:inter_token_latency_seconds",
    ],
    noted: &[],
    legacy: &[Legacy {
        name: "sglang:time_per_output_token_seconds",
        preferred: "sglang:inter_token_latency_seconds",
        histogram: true,
    }],
};

pub(super) const HISTOGRAM_PARTS: [&str; 3] = ["_bucket", "_sum", "_count"];

/// The histogram base of a `_bucket`, `_sum` or `_count` series.
pub(super) fn histogram_base(series: &str) -> Option<&str> {
    HISTOGRAM_PARTS
        .iter()
        .find_map(|part| series.strip_suffix(part))
}

impl FamilyList {
    pub(super) fn of(engine: EngineKind) -> &'static FamilyList {
        match engine {
            EngineKind::Vllm => &VLLM_FAMILIES,
            EngineKind::Sglang => &SGLANG_FAMILIES,
        }
    }

    /// The legacy entry a series belongs to.
    fn legacy(&self, series: &str) -> Option<&Legacy> {
        self.legacy
            .iter()
            .find(|legacy| legacy.covers(series, legacy.name))
    }

    /// What the parser does with the lines of `series`.
    pub(super) fn interest(&self, series: &str) -> Interest {
        if !series.starts_with(self.prefix) && !series.starts_with("process_") {
            // Most of a page, in one comparison; `_created` marks of other families too.
            return if series.ends_with("_created") {
                Interest::Parse
            } else {
                Interest::Skip
            };
        }
        let read = series.ends_with("_created")
            || series == "process_start_time_seconds"
            || self.series.contains(&series)
            || histogram_base(series).is_some_and(|base| self.histograms.contains(&base));
        if read {
            Interest::Parse
        } else if self.noted.contains(&series) || self.legacy(series).is_some() {
            Interest::Later
        } else {
            Interest::Skip
        }
    }

    /// The preferred series of the legacy entries that have samples on the page.
    pub(super) fn preferred_present(&self, page: &Page<'_>) -> Vec<&'static str> {
        let mut present = Vec::new();
        let mut previous = "";
        for sample in &page.samples {
            if sample.name == previous {
                continue; // children of a family come in runs
            }
            previous = sample.name;
            for legacy in self.legacy {
                if legacy.covers(sample.name, legacy.preferred)
                    && !present.contains(&legacy.preferred)
                {
                    present.push(legacy.preferred);
                }
            }
        }
        present
    }

    /// Which set-aside lines to parse: the first valid line of a noted series or of a legacy
    /// one whose preferred series is on the page (only its presence is noted), every line of
    /// a legacy series read in place of its absent preferred one.
    pub(super) fn take(&self, series: &str, preferred_present: &[&str]) -> Take {
        match self.legacy(series) {
            Some(legacy) if !preferred_present.contains(&legacy.preferred) => Take::All,
            _ => Take::FirstValid,
        }
    }
}

impl Legacy {
    /// Whether `series` is `name` or, for histograms, one of its parts.
    fn covers(&self, series: &str, name: &str) -> bool {
        if self.histogram {
            histogram_base(series) == Some(name)
        } else {
            series == name
        }
    }
}

/// Whether the adapter of `engine` reads the series `name` or asks whether it is on the
/// page. [`super::read_text`] parses no other; they cannot change an
/// [`super::EngineSample`].
pub fn reads_series(engine: EngineKind, name: &str) -> bool {
    FamilyList::of(engine).interest(name) != Interest::Skip
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_series_starts_with_the_engine_prefix() {
        for list in [&VLLM_FAMILIES, &SGLANG_FAMILIES] {
            let legacy = list.legacy.iter().flat_map(|l| [&l.name, &l.preferred]);
            for name in list
                .series
                .iter()
                .chain(list.histograms)
                .chain(list.noted)
                .chain(legacy)
            {
                assert!(name.starts_with(list.prefix), "{name}");
            }
        }
    }

    #[test]
    fn the_filter_keeps_what_the_adapter_reads_and_sets_aside_what_it_may_not_need() {
        let vllm = &VLLM_FAMILIES;
        for parsed in [
            "vllm:num_requests_running",
            "vllm:time_to_first_token_seconds_bucket",
            "vllm:inter_token_latency_seconds_sum",
            "vllm:e2e_request_latency_seconds_created",
            "python_gc_objects_created",
            "process_start_time_seconds",
        ] {
            assert_eq!(vllm.interest(parsed), Interest::Parse, "{parsed}");
        }
        for later in [
            "vllm:gpu_cache_usage_perc",
            "vllm:time_per_output_token_seconds_count",
            "vllm:prefix_cache_queries_total",
        ] {
            assert_eq!(vllm.interest(later), Interest::Later, "{later}");
        }
        for skipped in [
            "vllm:e2e_request_latency_seconds_bucket",
            "vllm:num_requests_running_total",
            "process_cpu_seconds_total",
            "sglang:num_running_reqs",
        ] {
            assert_eq!(vllm.interest(skipped), Interest::Skip, "{skipped}");
        }
        let itl = ["vllm:inter_token_latency_seconds"];
        let tpot = "vllm:time_per_output_token_seconds_bucket";
        assert_eq!(vllm.take(tpot, &itl), Take::FirstValid);
        assert_eq!(vllm.take(tpot, &[]), Take::All);
        assert_eq!(
            vllm.take("vllm:prefix_cache_queries_total", &[]),
            Take::FirstValid
        );
    }
}
