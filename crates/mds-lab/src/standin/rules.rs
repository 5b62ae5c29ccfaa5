//! Loads and role settings given before or after their targets exist: rules matched against
//! every (ModelDeployment, role) of the world, the most specific rule winning (the latest of
//! equals). A rule reaches a role when the role first appears, and again whenever a newer rule
//! wins it; a load profile's time axis starts then.

use std::collections::BTreeMap;

use mds_sim::{DeploymentKey, LoadProfile, RoleSettings, World, WorldError};

use crate::load_syntax::Selector;

/// What a rule sets on a role.
pub trait RuleValue: Clone {
    fn apply(&self, world: &mut World, key: &DeploymentKey, role: &str) -> Result<(), WorldError>;
}

impl RuleValue for LoadProfile {
    fn apply(&self, world: &mut World, key: &DeploymentKey, role: &str) -> Result<(), WorldError> {
        world.set_load(key, role, self.clone())
    }
}

impl RuleValue for RoleSettings {
    fn apply(&self, world: &mut World, key: &DeploymentKey, role: &str) -> Result<(), WorldError> {
        world.set_role_settings(key, role, *self)
    }
}

struct Rule<T> {
    selector: Selector,
    value: T,
    serial: u64,
}

/// Rules of one kind and which rule each role got last.
pub struct Rules<T> {
    rules: Vec<Rule<T>>,
    next_serial: u64,
    /// (deployment, its UID, role) -> serial of the rule applied.
    applied: BTreeMap<(DeploymentKey, String, String), u64>,
}

impl<T> Default for Rules<T> {
    fn default() -> Self {
        Rules {
            rules: Vec::new(),
            next_serial: 0,
            applied: BTreeMap::new(),
        }
    }
}

impl<T: RuleValue> Rules<T> {
    /// Adds a rule; one with the same selector is replaced.
    pub fn set(&mut self, selector: Selector, value: T) {
        self.rules.retain(|r| r.selector != selector);
        self.next_serial += 1;
        self.rules.push(Rule {
            selector,
            value,
            serial: self.next_serial,
        });
    }

    fn best(&self, key: &DeploymentKey, role: &str) -> Option<&Rule<T>> {
        self.rules
            .iter()
            .filter(|r| r.selector.matches(&key.namespace, &key.name, role))
            .max_by_key(|r| (r.selector.specificity(), r.serial))
    }

    /// Applies, to every role of the world, the rule that wins it if it has not got it yet.
    /// Returns what the world refused, as messages.
    pub fn resolve(&mut self, world: &mut World) -> Vec<String> {
        let mut refused = Vec::new();
        let mut seen = BTreeMap::new();
        for key in world.deployment_keys() {
            let Some(md) = world.deployment(&key) else {
                continue;
            };
            let uid = md.metadata.uid.clone().unwrap_or_default();
            let roles: Vec<String> = md.spec.roles.iter().map(|r| r.name.clone()).collect();
            for role in roles {
                let slot = (key.clone(), uid.clone(), role.clone());
                let Some(rule) = self.best(&key, &role) else {
                    continue;
                };
                let serial = rule.serial;
                if self.applied.get(&slot) != Some(&serial)
                    && let Err(e) = rule.value.apply(world, &key, &role)
                {
                    refused.push(format!("{key} role {role}: {e}"));
                }
                seen.insert(slot, serial);
            }
        }
        // Forget deployments and roles that are gone, so the map does not grow for ever.
        self.applied = seen;
        refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mds_sim::{Load, WorldConfig};

    fn world_with(roles: &[&str]) -> (World, DeploymentKey) {
        let start = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let mut world = World::new(WorldConfig::default(), start).unwrap();
        let roles: Vec<_> = roles
            .iter()
            .map(|r| serde_json::json!({"name": r, "instanceType": "h100"}))
            .collect();
        let md = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "llm", "namespace": "serving", "uid": "u1"},
            "spec": {"engine": {"name": "vLLM"}, "roles": roles},
        }))
        .unwrap();
        let key = world.apply_deployment(md).unwrap();
        (world, key)
    }

    fn rps(rps: f64) -> LoadProfile {
        LoadProfile::constant(Load::new(rps, 100.0, 10.0, 0.0).unwrap()).unwrap()
    }

    fn selector(ns: Option<&str>, name: Option<&str>, role: Option<&str>) -> Selector {
        Selector {
            namespace: ns.map(String::from),
            name: name.map(String::from),
            role: role.map(String::from),
        }
    }

    #[test]
    fn the_most_specific_rule_wins_and_each_is_applied_once() {
        let (mut world, _) = world_with(&["prefill", "decode"]);
        let mut rules = Rules::default();
        rules.set(Selector::default(), rps(1.0));
        rules.set(
            selector(Some("serving"), Some("llm"), Some("decode")),
            rps(3.0),
        );
        assert!(rules.resolve(&mut world).is_empty());
        let applied: Vec<u64> = rules.applied.values().copied().collect();
        assert_eq!(
            applied,
            vec![2, 1],
            "decode got the role rule, prefill the default"
        );
        // Nothing new: nothing is applied again (a profile's time axis would restart).
        let before = rules.applied.clone();
        rules.resolve(&mut world);
        assert_eq!(rules.applied, before);
        // A newer rule of the same specificity as the default replaces it for prefill only.
        rules.set(selector(Some("serving"), None, None), rps(2.0));
        rules.resolve(&mut world);
        let applied: Vec<u64> = rules.applied.values().copied().collect();
        assert_eq!(applied, vec![2, 3]);
    }

    #[test]
    fn a_replaced_deployment_gets_its_rules_again() {
        let (mut world, key) = world_with(&["server"]);
        let mut rules = Rules::default();
        rules.set(Selector::default(), rps(1.0));
        rules.resolve(&mut world);
        let mut md = world.deployment(&key).unwrap().clone();
        md.metadata.uid = Some("u2".into());
        world.apply_deployment(md).unwrap();
        rules.resolve(&mut world);
        let uids: Vec<&str> = rules.applied.keys().map(|k| k.1.as_str()).collect();
        assert_eq!(uids, vec!["u2"]);
    }
}
