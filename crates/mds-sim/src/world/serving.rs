//! Offered load → engines: each role's arrivals in a step are split evenly over its routed
//! instances (ready and not withdrawn); with none routed they are counted as unserved. Every
//! running engine advances, so withdrawn ones drain. A deployment offered requests is served
//! request by request instead (`requests.rs`). Each deployment keeps the time it was
//! served up to, so one deployment can be brought to the moment a page is read without
//! stepping the rest of the world.

use jiff::Timestamp;

use super::config::WorldConfig;
use super::deployment::{Deployment, role_settings};
use crate::load::Arrivals;

fn seconds_between(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64()
}

/// Serves one deployment's load from where it was served up to, to `to` (nothing when `to`
/// is not later).
pub(crate) fn serve(dep: &mut Deployment, to: Timestamp, config: &WorldConfig) {
    let from = dep.served_until;
    if to <= from {
        return;
    }
    dep.served_until = to;
    if let Some(mut load) = dep.requests.take() {
        let until = load.seconds_at(to);
        super::requests::serve(dep, &mut load, until);
        dep.requests = Some(load);
        return;
    }
    let dt = seconds_between(from, to);
    for role in dep.loads.keys() {
        if !dep.roles.contains_key(role) {
            dep.roles.insert(role.clone(), Default::default());
        }
    }
    // Fields apart, so a step allocates nothing: it runs every tick.
    let Deployment {
        roles,
        loads,
        settings,
        ..
    } = dep;
    for (role, instances) in roles.iter_mut() {
        let arrivals = loads.get(role).map_or_else(Arrivals::default, |load| {
            let a = seconds_between(load.origin, from).max(0.0);
            let b = seconds_between(load.origin, to).max(0.0);
            load.profile.arrivals(a, b)
        });
        let routed = instances
            .instances
            .values()
            .filter(|i| i.is_routed() && i.engine.is_some())
            .count();
        let share = if routed > 0 {
            arrivals.scaled(1.0 / routed as f64)
        } else {
            instances.unserved.add(&arrivals);
            Arrivals::default()
        };
        let profile = role_settings(settings, role, config).engine;
        for instance in instances.instances.values_mut() {
            let routed = instance.is_routed();
            if let Some(engine) = instance.engine.as_mut() {
                let input = if routed { share } else { Arrivals::default() };
                engine.advance(&profile, &input, dt);
            }
        }
    }
}
