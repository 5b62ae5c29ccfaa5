//! The tests of `answers`: Prometheus's JSON read, or refused in its own words.

use serde_json::json;

use super::*;
use crate::commands::simulate_prometheus::tests::range_of;

#[test]
fn prometheus_answers_are_read_or_refused_with_their_own_words() {
    let (data, warnings) =
        envelope(br#"{"status":"success","data":[{"__name__":"x","a":"b"}],"warnings":["w"]}"#)
            .unwrap();
    assert_eq!(warnings, ["w"]);
    assert_eq!(series_labels(data).unwrap()[0]["a"], "b");
    assert_eq!(
        envelope(br#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#)
            .unwrap_err(),
        AnswerError::Api("bad_data: parse error at char 5".into())
    );
    let AnswerError::NotJson(text) = envelope(b"<html>404 page not found</html>").unwrap_err()
    else {
        panic!("not JSON");
    };
    assert_eq!(text, "it starts \"<html>404 page not found</html>\"");
    assert!(series_labels(json!({"a": 1})).is_err());
    // Points land on their windows; NaN and points off the grid are no points.
    let r = range_of(3);
    let data = json!({"resultType": "matrix", "result": [
        {"metric": {}, "values": [[1735689660, "60"], [1735689720.0, "NaN"], [1735689780, "+Inf"], [1735699999, "5"]]},
        {"metric": {}, "values": [[1735689660, "1"]]}
    ]});
    assert_eq!(window_values(&r, data).unwrap(), [Some(61.0), None, None]);
    assert!(window_values(&r, json!({"resultType": "vector", "result": []})).is_err());
    assert!(
        window_values(
            &r,
            json!({"resultType": "matrix", "result": [{"values": [["x"]]}]})
        )
        .is_err()
    );
}
