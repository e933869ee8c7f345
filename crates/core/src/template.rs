//! Boot script templates: the defaults per role and the variables every
//! template may use. Rendering is pure (minijinja), so validation can prove
//! a template renders before anything is provisioned.
//!
//! Secrets are deliberately *not* template variables: the join token reaches
//! the boot script only through its environment (`DROVER_JOIN_TOKEN`), so a
//! rendered script can be logged, hashed or left on disk without leaking it.

use crate::spec::Role;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use std::collections::BTreeMap;

/// The default boot script template for `role`.
pub fn default_boot_script(role: Role) -> &'static str {
    match role {
        Role::Manager => include_str!("../templates/manager.sh.j2"),
        Role::Worker => include_str!("../templates/worker.sh.j2"),
        Role::Plain => include_str!("../templates/plain.sh.j2"),
    }
}

/// Everything a boot script template may refer to.
#[derive(Debug, Clone, Serialize)]
pub struct BootContext {
    /// `manager`, `worker` or `plain`.
    pub role: String,
    /// The cluster id drover made at bootstrap.
    pub cluster_id: String,
    /// The group's name.
    pub group: String,
    /// The instance's link token (also an engine label).
    pub link: String,
    /// The slot's logical id, or empty.
    pub logical_id: String,
    /// The address the engine advertises to the swarm.
    pub address: String,
    /// A reachable manager address to join (`host:port`), empty when `init`.
    pub join_addr: String,
    /// True for the very first manager of a new swarm.
    pub init: bool,
    /// Engine labels to put on the engine, drover's own included.
    pub engine_labels: BTreeMap<String, String>,
}

impl BootContext {
    /// A context with placeholder values, used to check that a template renders.
    pub fn example(role: Role) -> Self {
        BootContext {
            role: role.as_str().into(),
            cluster_id: "c0ffee".into(),
            group: "example".into(),
            link: "link-0".into(),
            logical_id: "127.0.0.10".into(),
            address: "127.0.0.10".into(),
            join_addr: "127.0.0.11:2377".into(),
            init: false,
            engine_labels: BTreeMap::new(),
        }
    }
}

/// Renders `template` with `ctx`. Unknown variables are errors, so a typo in
/// a template is caught by `validate` rather than at 3 a.m. on a new machine.
pub fn render(template: &str, ctx: &BootContext) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.add_template("boot", template)
        .map_err(|e| describe(&e))?;
    env.get_template("boot")
        .and_then(|t| t.render(minijinja::value::Serde(ctx)))
        .map_err(|e| describe(&e))
}

fn describe(e: &minijinja::Error) -> String {
    match e.line() {
        Some(line) => format!("{} (template line {line})", e.kind()),
        None => e.kind().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_render_for_every_role() {
        for role in [Role::Manager, Role::Worker, Role::Plain] {
            let mut ctx = BootContext::example(role);
            render(default_boot_script(role), &ctx).unwrap();
            ctx.init = true;
            render(default_boot_script(role), &ctx).unwrap();
        }
    }

    #[test]
    fn unknown_variable_is_an_error() {
        let e = render("{{ nope }}", &BootContext::example(Role::Worker)).unwrap_err();
        assert!(e.contains("undefined"), "{e}");
    }
}
