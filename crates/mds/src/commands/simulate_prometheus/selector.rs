//! The selector: the `--match` matchers, read as PromQL writes them and written back into the
//! selectors of the queries.

/// How a matcher compares a label's value, as PromQL writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Equal,
    NotEqual,
    Matches,
    NotMatches,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Equal => "=",
            Op::NotEqual => "!=",
            Op::Matches => "=~",
            Op::NotMatches => "!~",
        }
    }
}

/// One label matcher of `--match`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Matcher {
    pub label: String,
    pub op: Op,
    pub value: String,
}

impl Matcher {
    pub(super) fn promql(&self) -> String {
        let mut value = String::with_capacity(self.value.len() + 2);
        for c in self.value.chars() {
            match c {
                '\\' => value.push_str("\\\\"),
                '"' => value.push_str("\\\""),
                '\n' => value.push_str("\\n"),
                c => value.push(c),
            }
        }
        format!("{}{}\"{value}\"", self.label, self.op.text())
    }
}

/// The matchers of one `--match` value: PromQL label matchers separated by commas, optionally
/// in braces, values quoted (`"..."` or `'...'`, with backslash escapes) or bare up to the next
/// comma: `model_name=acme/chat-8b,namespace=prod`, `{pod=~"chat-.*"}`. The error says what
/// the text must be (the caller names the flag).
pub(super) fn parse_matchers(text: &str) -> Result<Vec<Matcher>, String> {
    let mut body = text.trim();
    if let Some(inner) = body.strip_prefix('{') {
        body = inner
            .strip_suffix('}')
            .ok_or("an opening { needs a closing } at the end")?;
    }
    let chars: Vec<char> = body.chars().collect();
    let mut i = 0;
    let skip = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    let rest = |i: usize| chars[i..].iter().collect::<String>();
    let mut out = Vec::new();
    loop {
        skip(&mut i);
        if i == chars.len() {
            break;
        }
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
            i += 1;
        }
        let label: String = chars[start..i].iter().collect();
        if label.is_empty() || label.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!(
                "{:?} does not start with a label name (letters, digits and _, not starting with a digit)",
                rest(start)
            ));
        }
        if label == "__name__" {
            return Err(
                "__name__ is not a label to match on: mds picks the engine series itself; match the labels of your deployment's series".into(),
            );
        }
        skip(&mut i);
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let op = match two.as_str() {
            "!=" => Op::NotEqual,
            "=~" => Op::Matches,
            "!~" => Op::NotMatches,
            _ if two.starts_with('=') => Op::Equal,
            _ => {
                return Err(format!(
                    "after label {label}: expected =, !=, =~ or !~, found {:?}",
                    rest(i)
                ));
            }
        };
        i += op.text().len();
        skip(&mut i);
        let value = match chars.get(i) {
            Some(&quote) if quote == '"' || quote == '\'' => {
                i += 1;
                let mut value = String::new();
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(format!("the value of {label} has no closing {quote}"));
                        }
                        Some('\\') => {
                            let escaped = match chars.get(i + 1) {
                                Some('n') => '\n',
                                Some('t') => '\t',
                                Some(&c) => c,
                                None => {
                                    return Err(format!(
                                        "the value of {label} ends in a lone backslash"
                                    ));
                                }
                            };
                            value.push(escaped);
                            i += 2;
                        }
                        Some(&c) if c == quote => {
                            i += 1;
                            break;
                        }
                        Some(&c) => {
                            value.push(c);
                            i += 1;
                        }
                    }
                }
                value
            }
            _ => {
                let start = i;
                while i < chars.len() && chars[i] != ',' {
                    i += 1;
                }
                let value: String = chars[start..i].iter().collect::<String>().trim().into();
                if value.is_empty() {
                    return Err(format!(
                        "{label} has no value; write {label}=\"\" to match series without the label"
                    ));
                }
                value
            }
        };
        skip(&mut i);
        match chars.get(i) {
            None => {}
            Some(',') => i += 1,
            Some(_) => {
                return Err(format!(
                    "after the value of {label}: expected a comma, found {:?}",
                    rest(i)
                ));
            }
        }
        out.push(Matcher { label, op, value });
    }
    if out.is_empty() {
        return Err("no matcher: write LABEL=VALUE,..., such as model_name=NAME".into());
    }
    Ok(out)
}

/// The selector as PromQL writes it inside braces, `{a="x",b=~"y"}`; `{}` when empty.
pub(super) fn selector_text(matchers: &[Matcher]) -> String {
    let inner: Vec<String> = matchers.iter().map(Matcher::promql).collect();
    format!("{{{}}}", inner.join(","))
}

/// `NAME{matchers,extra}` (`NAME` alone with neither).
pub(super) fn series_selector(name: &str, matchers: &[Matcher], extra: &str) -> String {
    let mut inner: Vec<String> = matchers.iter().map(Matcher::promql).collect();
    if !extra.is_empty() {
        inner.push(extra.to_string());
    }
    if inner.is_empty() {
        name.to_string()
    } else {
        format!("{name}{{{}}}", inner.join(","))
    }
}

#[cfg(test)]
#[path = "selector_tests.rs"]
mod tests;
