//! Exact decimal quantities (D26).
//!
//! Capacities, targets, ratios and tolerances are Kubernetes quantities (`"0.1"`, `"2k"`,
//! `"500m"`). They are parsed into [`Decimal`], a fixed-point number counted in nano units, so
//! admission compares them without binary floating point.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Nano units per unit: the finest precision a quantity can carry (`1n`).
const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// Kubernetes caps a quantity at 2^63-1 in magnitude.
const MAX_UNITS: i128 = i64::MAX as i128;
/// The longest quantity text accepted. The CRD declares it as `maxLength` too: without a bound,
/// the API server's cost estimate for the CEL rules that parse quantities exceeds its budget and
/// it refuses the whole CRD.
pub const MAX_QUANTITY_LENGTH: usize = 64;

/// An exact decimal number with nine fractional digits (nano precision).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Decimal {
    nanos: i128,
}

impl Decimal {
    pub const ONE: Decimal = Decimal {
        nanos: NANOS_PER_UNIT,
    };

    /// A whole number.
    pub const fn from_int(value: i64) -> Decimal {
        Decimal {
            nanos: value as i128 * NANOS_PER_UNIT,
        }
    }

    /// A value counted in nano units (`Decimal::from_nanos(100_000_000)` is 0.1).
    pub const fn from_nanos(nanos: i128) -> Decimal {
        Decimal { nanos }
    }

    /// The value in nano units.
    pub const fn nanos(self) -> i128 {
        self.nanos
    }

    pub const fn is_positive(self) -> bool {
        self.nanos > 0
    }

    /// The decimal nearest to `value` with `places` fractional digits (at most 9); `None` for
    /// NaN, infinities and magnitudes beyond the quantity range. For reporting measured
    /// floats (rates, latencies) in status, never for admission checks.
    pub fn from_f64_rounded(value: f64, places: u32) -> Option<Decimal> {
        let places = places.min(9);
        let scale = 10f64.powi(places as i32);
        let scaled = (value * scale).round();
        if !scaled.is_finite() || scaled.abs() > (MAX_UNITS as f64) * scale {
            return None;
        }
        let step = 10i128.pow(9 - places);
        Some(Decimal {
            nanos: scaled as i128 * step,
        })
    }

    /// Nearest binary float, for display and for planners that work in floats; never for
    /// admission checks.
    pub fn to_f64(self) -> f64 {
        self.nanos as f64 / NANOS_PER_UNIT as f64
    }

    /// How the ratio `numerator / denominator` of whole counts compares with this value,
    /// exactly. `denominator` must be positive.
    pub fn cmp_ratio(self, numerator: i64, denominator: i64) -> Ordering {
        debug_assert!(denominator > 0);
        // n/d <=> nanos/1e9  ⇔  n*1e9 <=> nanos*d
        (numerator as i128 * NANOS_PER_UNIT).cmp(&(self.nanos * denominator as i128))
    }

    /// The smallest whole `n` with `n >= self * count` (for `count >= 0`).
    pub fn ceil_times(self, count: i64) -> i128 {
        div_ceil(self.nanos * count as i128, NANOS_PER_UNIT)
    }

    /// The largest whole `n` with `n <= self * count` (for `count >= 0`).
    pub fn floor_times(self, count: i64) -> i128 {
        div_floor(self.nanos * count as i128, NANOS_PER_UNIT)
    }

    /// The smallest whole `n` with `n * self >= count` (self positive).
    pub fn ceil_div_into(self, count: i64) -> i128 {
        div_ceil(count as i128 * NANOS_PER_UNIT, self.nanos)
    }

    /// The largest whole `n` with `n * self <= count` (self positive).
    pub fn floor_div_into(self, count: i64) -> i128 {
        div_floor(count as i128 * NANOS_PER_UNIT, self.nanos)
    }
}

fn div_floor(a: i128, b: i128) -> i128 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn div_ceil(a: i128, b: i128) -> i128 {
    -div_floor(-a, b)
}

impl fmt::Display for Decimal {
    /// Plain decimal notation: `0.1`, `2000`, `-1.5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written backwards into a buffer: statuses print many of these every pass, and the
        // formatting machinery costs several times the digits. Any i128 has at most 39.
        let mut text = [0u8; 48];
        let mut at = text.len();
        let mut put = |byte: u8| {
            at -= 1;
            text[at] = byte;
        };
        let abs = self.nanos.unsigned_abs();
        // The fraction without its trailing zeros.
        let mut nanos = (abs % NANOS_PER_UNIT as u128) as u32;
        if nanos != 0 {
            let mut places = 9;
            while nanos.is_multiple_of(10) {
                nanos /= 10;
                places -= 1;
            }
            for _ in 0..places {
                put(b'0' + (nanos % 10) as u8);
                nanos /= 10;
            }
            put(b'.');
        }
        // The whole part from its last digit: any past u64's range (rare) in u128, the rest
        // in u64, which divides faster.
        let mut whole = abs / NANOS_PER_UNIT as u128;
        while whole > u128::from(u64::MAX) {
            put(b'0' + (whole % 10) as u8);
            whole /= 10;
        }
        let mut whole = whole as u64;
        loop {
            put(b'0' + (whole % 10) as u8);
            whole /= 10;
            if whole == 0 {
                break;
            }
        }
        if self.nanos < 0 {
            put(b'-');
        }
        // Only ASCII digits, '.' and '-' were written.
        f.write_str(std::str::from_utf8(&text[at..]).map_err(|_| fmt::Error)?)
    }
}

/// Why a quantity could not be parsed. Messages complete the sentence "the quantity …".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("is empty; write a number such as \"2000\", \"0.5\" or \"2k\"")]
    Empty,
    #[error(
        "{0:?} is not a Kubernetes quantity; write a number with an optional suffix (m, k, M, G, Ki, Mi, e3), such as \"2000\", \"0.5\" or \"2k\""
    )]
    Malformed(String),
    #[error("{0:?} is finer than 1n; at most nine decimal places are kept")]
    TooPrecise(String),
    #[error("{0:?} is larger than 2^63-1, the largest Kubernetes quantity")]
    TooLarge(String),
    #[error("has {0} characters; at most {MAX_QUANTITY_LENGTH} are accepted")]
    TooLong(usize),
}

/// Parses the Kubernetes quantity syntax exactly (D26).
pub fn parse_decimal(text: &str) -> Result<Decimal, QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Empty);
    }
    if text.len() > MAX_QUANTITY_LENGTH {
        return Err(QuantityError::TooLong(text.len()));
    }
    let malformed = || QuantityError::Malformed(text.to_string());
    let bytes = text.as_bytes();
    let mut pos = 0;
    let negative = match bytes[0] {
        b'-' => {
            pos = 1;
            true
        }
        b'+' => {
            pos = 1;
            false
        }
        _ => false,
    };
    let number_start = pos;
    while pos < bytes.len() && (bytes[pos].is_ascii_digit() || bytes[pos] == b'.') {
        pos += 1;
    }
    let number = &text[number_start..pos];
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    if (whole.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(malformed());
    }
    let (power_of_ten, power_of_1024) = parse_suffix(&text[pos..]).ok_or_else(malformed)?;

    // Significant digits without leading zeros, and the decimal exponent they carry.
    let digits: String = format!("{whole}{frac}");
    let digits = digits.trim_start_matches('0');
    let mut exponent = power_of_ten - frac.len() as i64 + 9; // in nanos
    let digits = if digits.is_empty() { "0" } else { digits };
    // Trailing zeros move into the exponent so long zero tails never overflow.
    let trimmed = digits.trim_end_matches('0');
    let (digits, exponent_shift) = if trimmed.is_empty() {
        ("0", 0)
    } else {
        (trimmed, (digits.len() - trimmed.len()) as i64)
    };
    exponent += exponent_shift;
    if digits.len() > 36 {
        return Err(QuantityError::TooLarge(text.to_string()));
    }
    let mut mantissa: i128 = digits.parse().map_err(|_| malformed())?;
    let too_large = || QuantityError::TooLarge(text.to_string());
    for _ in 0..power_of_1024 {
        mantissa = mantissa.checked_mul(1024).ok_or_else(too_large)?;
    }
    let nanos = if mantissa == 0 {
        0
    } else if exponent >= 0 {
        if exponent > 38 {
            return Err(too_large());
        }
        mantissa
            .checked_mul(10i128.pow(exponent as u32))
            .ok_or_else(too_large)?
    } else {
        if exponent < -38 {
            return Err(QuantityError::TooPrecise(text.to_string()));
        }
        let divisor = 10i128.pow((-exponent) as u32);
        if mantissa % divisor != 0 {
            return Err(QuantityError::TooPrecise(text.to_string()));
        }
        mantissa / divisor
    };
    if nanos > MAX_UNITS * NANOS_PER_UNIT {
        return Err(too_large());
    }
    Ok(Decimal {
        nanos: if negative { -nanos } else { nanos },
    })
}

/// Decimal and binary suffixes: returns (power of ten, power of 1024).
fn parse_suffix(suffix: &str) -> Option<(i64, u32)> {
    Some(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 1),
        "Mi" => (0, 2),
        "Gi" => (0, 3),
        "Ti" => (0, 4),
        "Pi" => (0, 5),
        "Ei" => (0, 6),
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))?;
            let digits = rest
                .strip_prefix('+')
                .or_else(|| rest.strip_prefix('-'))
                .unwrap_or(rest);
            if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            (rest.parse::<i64>().ok()?, 0)
        }
    })
}

/// A quantity as written in a manifest: the text is kept as the user wrote it (YAML integers
/// are accepted too, like Kubernetes resource quantities) and parsed with [`Quantity::value`].
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(transparent)]
pub struct Quantity(pub String);

impl Quantity {
    pub fn value(&self) -> Result<Decimal, QuantityError> {
        parse_decimal(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(text: &str) -> Self {
        Quantity(text.to_string())
    }
}

impl From<Decimal> for Quantity {
    fn from(value: Decimal) -> Self {
        Quantity(value.to_string())
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity: a quoted string such as \"0.5\" or \"2k\", or an integer")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Quantity, E> {
                // The API server's int-or-string schema refuses a bare decimal; say so here too.
                Err(E::custom(format!(
                    "a bare decimal number ({v}) is not accepted; quote it as a string, such as \"{v}\""
                )))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The Kubernetes quantity pattern, as used for `resource.Quantity` in CRDs.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

impl schemars::JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "pattern": QUANTITY_PATTERN,
            "maxLength": MAX_QUANTITY_LENGTH,
            "x-kubernetes-int-or-string": true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Plain decimal notation as first written: whole part, then the nine-digit fraction
    /// with its trailing zeros cut.
    fn displayed_plainly(nanos: i128) -> String {
        let sign = if nanos < 0 { "-" } else { "" };
        let abs = nanos.unsigned_abs();
        let (whole, frac) = (abs / 1_000_000_000, abs % 1_000_000_000);
        if frac == 0 {
            format!("{sign}{whole}")
        } else {
            format!(
                "{sign}{whole}.{}",
                format!("{frac:09}").trim_end_matches('0')
            )
        }
    }

    proptest! {
        #[test]
        fn a_decimal_displays_as_plain_notation(nanos in any::<i128>(), small in -10_i64.pow(15)..10_i64.pow(15)) {
            for nanos in [nanos, i128::from(small), i128::from(small) * 1_000, i128::MIN, i128::MAX] {
                prop_assert_eq!(Decimal { nanos }.to_string(), displayed_plainly(nanos));
            }
        }
    }

    fn d(text: &str) -> Decimal {
        parse_decimal(text).unwrap()
    }

    #[test]
    fn parses_the_kubernetes_quantity_syntax_exactly() {
        let cases = [
            ("0.1", 100_000_000),
            ("2000", 2_000 * NANOS_PER_UNIT),
            ("2k", 2_000 * NANOS_PER_UNIT),
            ("500m", 500_000_000),
            ("1.5", 1_500_000_000),
            (".5", 500_000_000),
            ("5.", 5 * NANOS_PER_UNIT),
            ("+3", 3 * NANOS_PER_UNIT),
            ("-1.25", -1_250_000_000),
            ("1Ki", 1024 * NANOS_PER_UNIT),
            ("1.5Ki", 1536 * NANOS_PER_UNIT),
            ("2e3", 2_000 * NANOS_PER_UNIT),
            ("25E-2", 250_000_000),
            ("1n", 1),
            ("3u", 3_000),
            ("0", 0),
            ("000.000", 0),
            ("1M", 1_000_000 * NANOS_PER_UNIT),
            ("1000000000000000000000000000000e-30", NANOS_PER_UNIT),
        ];
        for (text, nanos) in cases {
            assert_eq!(d(text).nanos(), nanos, "{text}");
        }
    }

    #[test]
    fn refuses_malformed_imprecise_and_huge_quantities() {
        for text in [
            "", "abc", "1.2.3", "1 k", "1kb", "k", ".", "1e", "1e+", "0x10", "1,5", " 1",
        ] {
            assert!(parse_decimal(text).is_err(), "{text:?} should be refused");
        }
        assert!(matches!(
            parse_decimal("0.5n"),
            Err(QuantityError::TooPrecise(_))
        ));
        assert!(matches!(
            parse_decimal("10E"),
            Err(QuantityError::TooLarge(_))
        ));
        assert!(matches!(
            parse_decimal("1e9999"),
            Err(QuantityError::TooLarge(_))
        ));
        assert!(matches!(
            parse_decimal("1e-9999"),
            Err(QuantityError::TooPrecise(_))
        ));
        assert!(parse_decimal("9223372036854775807").is_ok());
        assert!(matches!(
            parse_decimal("9223372036854775808"),
            Err(QuantityError::TooLarge(_))
        ));
        let longest = format!("{}1", "0".repeat(MAX_QUANTITY_LENGTH - 1));
        assert_eq!(parse_decimal(&longest), Ok(Decimal::ONE));
        assert_eq!(
            parse_decimal(&format!("0{longest}")),
            Err(QuantityError::TooLong(MAX_QUANTITY_LENGTH + 1))
        );
    }

    #[test]
    fn rounds_measured_floats_for_status() {
        assert_eq!(
            Decimal::from_f64_rounded(2400.0, 3).unwrap().to_string(),
            "2400"
        );
        assert_eq!(
            Decimal::from_f64_rounded(3_966.666_666, 3)
                .unwrap()
                .to_string(),
            "3966.667"
        );
        assert_eq!(
            Decimal::from_f64_rounded(0.549_99, 4).unwrap().to_string(),
            "0.55"
        );
        assert_eq!(
            Decimal::from_f64_rounded(-1.5, 0).unwrap().to_string(),
            "-2"
        );
        assert_eq!(Decimal::from_f64_rounded(f64::NAN, 3), None);
        assert_eq!(Decimal::from_f64_rounded(f64::INFINITY, 3), None);
        assert_eq!(Decimal::from_f64_rounded(1e30, 3), None);
    }

    #[test]
    fn displays_plain_decimals() {
        assert_eq!(d("0.1").to_string(), "0.1");
        assert_eq!(d("2k").to_string(), "2000");
        assert_eq!(d("-1.50").to_string(), "-1.5");
        assert_eq!(d("1n").to_string(), "0.000000001");
    }

    #[test]
    fn exact_ratio_comparisons() {
        let half = d("0.5");
        assert_eq!(half.cmp_ratio(1, 2), Ordering::Equal);
        assert_eq!(half.cmp_ratio(2, 3), Ordering::Greater, "2/3 > 0.5");
        assert_eq!(d("0.1").cmp_ratio(1, 10), Ordering::Equal);
        assert_eq!(d("0.333333333").cmp_ratio(1, 3), Ordering::Greater);
        assert_eq!(half.ceil_times(3), 2);
        assert_eq!(half.floor_times(3), 1);
        assert_eq!(d("2").ceil_div_into(3), 2);
        assert_eq!(d("2").floor_div_into(3), 1);
    }

    #[test]
    fn quantity_accepts_strings_and_integers_but_not_bare_decimals() {
        let q: Quantity = serde_json::from_str("\"2k\"").unwrap();
        assert_eq!(q.value().unwrap(), Decimal::from_int(2000));
        let q: Quantity = serde_json::from_str("8").unwrap();
        assert_eq!(q.0, "8");
        let err = serde_json::from_str::<Quantity>("0.1").unwrap_err();
        assert!(err.to_string().contains("quote it"), "{err}");
    }

    proptest! {
        #[test]
        fn never_panics_on_any_text(text in ".{0,40}") {
            let _ = parse_decimal(&text);
        }

        #[test]
        fn display_round_trips(nanos in -(MAX_UNITS * NANOS_PER_UNIT)..=(MAX_UNITS * NANOS_PER_UNIT)) {
            let value = Decimal::from_nanos(nanos);
            prop_assert_eq!(parse_decimal(&value.to_string()).unwrap(), value);
        }

        #[test]
        fn ratio_comparison_matches_cross_multiplication(
            nanos in 1i128..10_000_000_000_000, num in 0i64..2048, den in 1i64..2048
        ) {
            let value = Decimal::from_nanos(nanos);
            let expected = (num as i128 * NANOS_PER_UNIT).cmp(&(nanos * den as i128));
            prop_assert_eq!(value.cmp_ratio(num, den), expected);
            prop_assert!(value.ceil_times(den) * NANOS_PER_UNIT >= nanos * den as i128);
            prop_assert!((value.ceil_times(den) - 1) * NANOS_PER_UNIT < nanos * den as i128);
            prop_assert!(value.floor_times(den) * NANOS_PER_UNIT <= nanos * den as i128);
        }
    }
}
