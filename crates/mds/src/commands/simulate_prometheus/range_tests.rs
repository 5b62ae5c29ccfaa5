//! The tests of `range`: durations, and the windows the range flags ask for.

use super::*;

#[test]
fn durations_and_ranges_follow_the_flags() {
    assert_eq!(parse_duration("7d").unwrap(), 604_800.0);
    assert_eq!(parse_duration("1h30m").unwrap(), 5400.0);
    assert_eq!(parse_duration("90").unwrap(), 90.0);
    assert!(parse_duration("7 days").is_err());
    assert!(parse_duration("0s").is_err());
    assert!(parse_duration("-5m").is_err());
    assert!(
        parse_duration("99999999999999999999")
            .unwrap_err()
            .contains("10 years")
    );
    assert!(parse_duration("1000w").unwrap_err().contains("10 years"));
    let now = 1_700_000_123;
    let flags = |since, start, end, window| RangeFlags {
        since,
        start,
        end,
        window,
    };
    // --since up to now: whole clock windows, the default window from the range.
    let r = range(&flags(Some("7d"), None, None, None), now).unwrap();
    assert_eq!(
        (r.window, r.count, r.end() % 600, r.end() <= now),
        (600, 1008, 0, true)
    );
    assert!(r.default_window);
    let r = range(&flags(Some("2h"), None, None, None), now).unwrap();
    assert_eq!((r.window, r.count), (60, 120));
    let r = range(&flags(Some("30d"), None, None, None), now).unwrap();
    assert_eq!(r.window, 1800);
    // --start/--end: windows from the start, the rest left out.
    let r = range(
        &flags(
            None,
            Some("2025-01-01T00:00:00Z"),
            Some("2025-01-01T01:00:30+00:00"),
            Some("1m"),
        ),
        now,
    )
    .unwrap();
    assert_eq!(
        (r.start, r.window, r.count, r.left_out),
        (1_735_689_600, 60, 60, 30)
    );
    assert_eq!(r.evaluations(), (1_735_689_660, 1_735_693_200));
    let err = |f: RangeFlags| range(&f, now).unwrap_err();
    assert!(err(flags(None, None, None, None)).contains("needs a range"));
    assert!(err(flags(None, Some("yesterday"), None, None)).starts_with("--start \"yesterday\""));
    assert!(
        err(flags(
            None,
            Some("2025-01-02T00:00:00Z"),
            Some("2025-01-01T00:00:00Z"),
            None
        ))
        .contains("is not after")
    );
    assert!(err(flags(Some("1h"), None, None, Some("10s"))).contains("at least 15 s"));
    assert!(err(flags(Some("1h"), None, None, Some("2h"))).contains("longer than the range"));
    assert!(err(flags(Some("1h"), None, None, Some("15.5s"))).contains("whole number"));
    assert!(err(flags(Some("365d"), None, None, Some("15s"))).contains("at most 11000"));
}
