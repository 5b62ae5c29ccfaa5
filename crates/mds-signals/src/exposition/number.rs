//! Numbers as the exposition format writes them: sample values and `le` bounds.

/// A sample value or a numeric label such as `le`: exactly what `str::parse::<f64>` accepts,
/// with a fast path for short decimals.
pub fn parse_value(text: &str) -> Option<f64> {
    fast_decimal(text.as_bytes()).or_else(|| {
        // Rust's float grammar accepts "NaN", "+Inf", "-inf", "Infinity" in any case and
        // exponents; it refuses hex, underscores and empty strings.
        text.parse::<f64>().ok()
    })
}

const POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Clinger's fast path: a decimal with at most 15 significant digits and a power of ten up to
/// 22 is one exact integer times or divided by one exact power of ten, so a single IEEE
/// operation rounds it correctly. Anything else returns `None` for the general parser.
pub(super) fn fast_decimal(bytes: &[u8]) -> Option<f64> {
    let (negative, mut pos) = match bytes.first()? {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    // Integer then fraction digits into one integer; each fraction digit lowers the exponent.
    let mut mantissa: u64 = 0;
    let integer_start = pos;
    pos = push_digits(bytes, pos, &mut mantissa);
    let mut count = pos - integer_start;
    let mut fraction = 0;
    if bytes.get(pos) == Some(&b'.') {
        let fraction_start = pos + 1;
        pos = push_digits(bytes, fraction_start, &mut mantissa);
        fraction = pos - fraction_start;
        count += fraction;
    }
    // Up to 19 digits cannot overflow; below 10^15 the significant ones are at most 15.
    if count == 0 || count > 19 || mantissa >= 1_000_000_000_000_000 {
        return None;
    }
    let mut exponent = -(fraction as i32);
    if let Some(b'e' | b'E') = bytes.get(pos) {
        pos += 1;
        let (sign, start) = match bytes.get(pos) {
            Some(b'-') => (-1, pos + 1),
            Some(b'+') => (1, pos + 1),
            _ => (1, pos),
        };
        let exp_digits = bytes.get(start..)?;
        if exp_digits.is_empty()
            || exp_digits.len() > 3
            || !exp_digits.iter().all(u8::is_ascii_digit)
        {
            return None;
        }
        let value: i32 = exp_digits
            .iter()
            .fold(0, |acc, b| acc * 10 + i32::from(b - b'0'));
        exponent += sign * value;
        pos = bytes.len();
    }
    if pos != bytes.len() {
        return None;
    }
    let magnitude = mantissa as f64;
    let value = match exponent {
        0 => magnitude,
        1..=22 => magnitude * POWERS_OF_TEN[exponent as usize],
        -22..=-1 => magnitude / POWERS_OF_TEN[(-exponent) as usize],
        _ if mantissa == 0 => 0.0,
        _ => return None,
    };
    Some(if negative { -value } else { value })
}

/// Appends the decimal digits from `pos` on to `mantissa` (wrapping; callers bound the count)
/// and returns the position after them.
fn push_digits(bytes: &[u8], mut pos: usize, mantissa: &mut u64) -> usize {
    while let Some(&b) = bytes.get(pos) {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        *mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(digit));
        pos += 1;
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn accepts_exactly_what_the_standard_parser_accepts(
            text in "[-+]?[0-9]{0,22}(\\.[0-9]{0,22})?([eE][-+]?[0-9]{0,4})?|[-+.0-9eEinfINFaAy]{0,8}"
        ) {
            let expected = text.parse::<f64>().ok();
            let got = parse_value(&text);
            prop_assert_eq!(got.map(f64::to_bits), expected.map(f64::to_bits), "{:?}", text);
        }
    }
}
