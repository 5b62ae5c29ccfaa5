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
        // The role-level Service `<md>-<role>` must be a DNS-1035 label too.
        check("Service", format!("{md}-{}", role.name), true);
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

    fn role(name: &str, size: i32, max_replicas: i32) -> NamedRole<'_> {
        NamedRole {
            name,
            size,
            max_replicas,
        }
    }

    #[test]
    fn generated_names_are_checked_at_max_replicas() {
        // size 1: only <md>-<role> matters, whatever the ordinal.
        let md = "m".repeat(55);
        assert!(generated_name_problems(&md, &role("decode", 1, 1024), &[]).is_empty());
        assert_eq!(
            generated_name_problems(&md, &role("decode-long", 1, 2), &[]).len(),
            1,
            "56 + 12 characters"
        );
        // size > 1: the Pod name gains digits with the ordinal: r9 fits, r10 does not.
        let md = "m".repeat(50); // 50 + "-decode-r9-m1" (13) = 63
        assert!(generated_name_problems(&md, &role("decode", 2, 10), &[]).is_empty());
        let problems = generated_name_problems(&md, &role("decode", 2, 11), &[]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("-decode-r10-m1"), "{problems:?}");
        // Services are DNS-1035 labels: a deployment name starting with a digit fails.
        let problems = generated_name_problems("7b", &role("decode", 2, 4), &[]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("start with a letter"));
    }

    #[test]
    fn instance_services_must_not_collide_with_other_roles() {
        let others = [
            role("decode", 2, 4),
            role("decode-r3", 1, 1),
            role("decode-r7", 1, 1),
        ];
        let problems = generated_name_problems("md", &others[0], &others);
        assert_eq!(
            problems.len(),
            1,
            "only ordinal 3 is reachable: {problems:?}"
        );
        assert!(problems[0].contains("\"decode-r3\""));
        let others = [
            role("decode", 2, 4),
            role("decode-r03", 1, 1),
            role("decode-rx", 1, 1),
        ];
        assert!(generated_name_problems("md", &others[0], &others).is_empty());
    }
}
