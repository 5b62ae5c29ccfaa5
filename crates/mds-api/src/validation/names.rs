//! Kubernetes name rules.

/// RFC 1123 label: lower-case alphanumerics and '-', starting and ending alphanumeric, 1..63.
pub fn is_dns1123_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// RFC 1035 label (Service names): an RFC 1123 label that starts with a letter.
pub fn is_dns1035_label(name: &str) -> bool {
    is_dns1123_label(name) && name.as_bytes()[0].is_ascii_lowercase()
}

/// RFC 1123 subdomain (object names): dot-separated labels, at most 253 characters.
pub fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns1123_label)
}

/// A role as the generated-name rules see it.
pub(super) struct NamedRole<'a> {
    pub name: &'a str,
    /// Pods per instance.
    pub size: i32,
    /// Highest instance count the scaler may write.
    pub max_replicas: i32,
}

/// Problems with the names GPUStack generates for `role` at its maximum (TARGET.md §7):
/// the member Pod `<md>-<role>-r<max-1>-m<size-1>` and the per-instance Service
/// `<md>-<role>-r<max-1>` for `size > 1`, else the role name `<md>-<role>`; and collisions of
/// the per-instance Services with another role's Services.
pub(super) fn generated_name_problems(
    md: &str,
    role: &NamedRole,
    others: &[NamedRole],
) -> Vec<String> {
    let mut problems = Vec::new();
    let last = role.max_replicas.max(1) - 1;
    let mut check = |what: &str, name: String, dns1035: bool| {
        if name.len() > 63 {
            problems.push(format!(
                "at maxReplicas {} the generated {what} name {name:?} has {} characters, more than the 63 Kubernetes allows; shorten the deployment or role name or lower maxReplicas",
                role.max_replicas,
                name.len()
            ));
        } else if dns1035 && !is_dns1035_label(&name) {
            problems.push(format!(
                "the generated {what} name {name:?} must start with a letter; rename the deployment"
            ));
        }
    };
    if role.size > 1 {
        check(
            "Pod",
            format!("{md}-{}-r{last}-m{}", role.name, role.size - 1),
            false,
        );
        check("Service", format!("{md}-{}-r{last}", role.name), true);
        for other in others.iter().filter(|o| o.name != role.name) {
            // `<role>-r<n>` equals another role's name exactly when that name is the role
            // name, "-r" and an ordinal this role can reach.
            if let Some(ordinal) = other
                .name
                .strip_prefix(role.name)
                .and_then(|rest| rest.strip_prefix("-r"))
                .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .filter(|digits| !digits.starts_with('0') || digits.len() == 1)
                .and_then(|digits| digits.parse::<i64>().ok())
                && ordinal <= last as i64
            {
                problems.push(format!(
                    "at maxReplicas {} the Service of instance {ordinal} ({md}-{}-r{ordinal}) collides with the Service of role {:?}; rename one of the roles or lower maxReplicas",
                    role.max_replicas, role.name, other.name
                ));
            }
        }
    } else {
        check("role", format!("{md}-{}", role.name), false);
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules() {
        assert!(is_dns1123_label("llm-serving"));
        assert!(is_dns1123_label("7b"));
        assert!(!is_dns1123_label("Decode"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label("a-"));
        assert!(!is_dns1123_label(""));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1035_label("a7"));
        assert!(!is_dns1035_label("7b"));
        assert!(is_dns1123_subdomain("llm.serving"));
        assert!(!is_dns1123_subdomain("llm..serving"));
    }
}
