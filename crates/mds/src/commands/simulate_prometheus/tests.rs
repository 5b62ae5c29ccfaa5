//! What the tests of the submodules share, and the property test of every parser at once.

use serde_json::json;

use super::answers::{envelope, window_values};
use super::range::{Range, RangeFlags, parse_duration, range, span_text, time_text};
use super::selector::{Matcher, parse_matchers};

pub(super) fn matchers(text: &str) -> Vec<Matcher> {
    parse_matchers(text).unwrap()
}

pub(super) fn range_of(count: i64) -> Range {
    Range {
        start: 1_735_689_600,
        window: 60,
        count,
        left_out: 0,
        default_window: false,
    }
}

proptest::proptest! {
    /// No flag text, answer body or answer point panics.
    #[test]
    fn no_input_panics(
        text in ".{0,40}",
        number in proptest::num::f64::ANY,
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        when in proptest::prelude::any::<i64>(),
    ) {
        let _ = parse_matchers(&text);
        let _ = parse_duration(&text);
        let _ = parse_duration(&number.to_string());
        for flags in [
            RangeFlags { since: Some(&text), ..RangeFlags::default() },
            RangeFlags { start: Some(&text), end: Some(&text), window: Some(&text), ..RangeFlags::default() },
            RangeFlags { since: Some("1h"), window: Some(&text), ..RangeFlags::default() },
        ] {
            let _ = range(&flags, when.clamp(-8_000_000_000_000, 8_000_000_000_000));
        }
        let _ = envelope(&bytes);
        let data = json!({"resultType": "matrix", "result": [{"values": [[number, text.clone()], [when as f64, number.to_string()]]}]});
        let _ = window_values(&range_of(3), data);
        let _ = time_text(when);
        let _ = span_text(when);
    }
}
