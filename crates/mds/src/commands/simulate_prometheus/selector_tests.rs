//! The tests of `selector`: `--match` read and written back as PromQL.

use super::*;
use crate::commands::simulate_prometheus::tests::matchers;

#[test]
fn matchers_read_as_promql_writes_them() {
    let m = matchers("model_name=acme/chat-8b, namespace=\"prod\",pod=~'chat-.*',job!=x");
    assert_eq!(
        selector_text(&m),
        r#"{model_name="acme/chat-8b",namespace="prod",pod=~"chat-.*",job!="x"}"#
    );
    let m = matchers(r#"{model_name!~"a\"b,c"}"#);
    assert_eq!(m[0].value, "a\"b,c");
    assert_eq!(m[0].op, Op::NotMatches);
    assert_eq!(selector_text(&m), r#"{model_name!~"a\"b,c"}"#);
    let err = |t: &str| parse_matchers(t).unwrap_err();
    assert!(err("").contains("no matcher"));
    assert!(err("1abc=x").contains("label name"));
    assert!(err("model_name").contains("expected =, !=, =~ or !~"));
    assert!(err("model_name=").contains("has no value"));
    assert!(err("model_name=\"x").contains("no closing"));
    assert!(err("a=\"x\" b=y").contains("expected a comma"));
    assert!(err("{a=x").contains("closing }"));
    assert!(err("__name__=x").contains("not a label to match on"));
}
