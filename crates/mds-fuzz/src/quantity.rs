//! Target 2: Kubernetes quantities (`"2k"`, `"500m"`, `"1.5Gi"`, `"3e-2"`, huge and tiny).
//! The input is one or two texts (split at the first newline). Oracles: a quantity that
//! parses prints (`Decimal`'s `Display`) to a text that parses to the same value; its value
//! equals the one an independent exact reading of the same grammar gives; and two parsed
//! quantities order as their exact values do.

use std::cmp::Ordering;

use mds_api::quantity::{Quantity, parse_decimal};

pub fn run(data: &[u8]) {
    let Some(text) = super::text(data) else {
        return;
    };
    let (a, b) = text.split_once('\n').unwrap_or((text, "0"));
    let parsed: Vec<_> = [a, b]
        .into_iter()
        .map(|t| {
            let value = parse_decimal(t);
            assert_eq!(
                Quantity::from(t).value(),
                value,
                "Quantity and parse_decimal"
            );
            if let Ok(v) = value {
                let printed = v.to_string();
                assert_eq!(
                    parse_decimal(&printed),
                    Ok(v),
                    "{t:?} printed as {printed:?}"
                );
                if let Some(exact) = exact_nanos(t) {
                    assert_eq!(v.nanos(), exact, "{t:?} parsed to another value");
                }
            }
            value.ok()
        })
        .collect();
    if let (Some(x), Some(y)) = (parsed[0], parsed[1])
        && let (Some(ex), Some(ey)) = (exact_nanos(a), exact_nanos(b))
    {
        assert_eq!(x.cmp(&y), ex.cmp(&ey), "{a:?} against {b:?}");
        assert_eq!(x == y, ex.cmp(&ey) == Ordering::Equal);
    }
}

/// The exact value of `text` in nano units, read digit by digit: `None` when the text is not
/// in the grammar (sign, digits with one optional point, one suffix: `n u m k M G T P E`,
/// `Ki`…`Ei`, or `e`/`E` with a signed whole exponent) or its value is not a whole number of
/// nano units within ±2^127.
pub fn exact_nanos(text: &str) -> Option<i128> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let split = rest
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(split);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    let (mut ten, binary) = suffix_powers(suffix)?;
    ten += 9 - frac.len() as i64;
    // value = digits × 10^ten × 1024^binary, in nanos.
    let mut value: i128 = 0;
    for d in whole.bytes().chain(frac.bytes()) {
        value = value.checked_mul(10)?.checked_add(i128::from(d - b'0'))?;
    }
    if value == 0 {
        return Some(0);
    }
    for _ in 0..binary {
        value = value.checked_mul(1024)?;
    }
    let mut pending_tens = ten;
    while pending_tens > 0 {
        value = value.checked_mul(10)?;
        pending_tens -= 1;
    }
    while pending_tens < 0 {
        if value % 10 != 0 {
            return None;
        }
        value /= 10;
        pending_tens += 1;
    }
    Some(if negative { -value } else { value })
}

fn suffix_powers(suffix: &str) -> Option<(i64, u32)> {
    let decimal = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
    if let Some(i) = decimal.iter().position(|s| *s == suffix) {
        return Some((3 * i as i64 - 9, 0));
    }
    let binary = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if let Some(i) = binary.iter().position(|s| *s == suffix) {
        return Some((0, i as u32 + 1));
    }
    let exponent = suffix.strip_prefix(['e', 'E'])?;
    let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if digits.is_empty() || digits.len() > 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((exponent.parse().ok()?, 0))
}
