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

/// The default boot script template for a `role` machine of `provider`:
/// on machines that boot an OS (`incus`, `ec2`), a cloud-init script that
/// configures the distribution's engine and installs the controller as a
/// systemd unit; on hosts the operator has (`ssh`), the same run once at
/// enrollment, labelling the host's own engine; elsewhere (`local`,
/// `sim`), a script run beside an engine the provider started.
pub fn default_boot_script(provider: &str, role: Role) -> &'static str {
    match (provider, role) {
        (crate::spec::INCUS_PROVIDER, Role::Manager) => INCUS_MANAGER,
        (crate::spec::INCUS_PROVIDER, Role::Worker) => INCUS_WORKER,
        (crate::spec::INCUS_PROVIDER, Role::Plain) => INCUS_HEAD,
        (crate::spec::EC2_PROVIDER, Role::Manager) => EC2_MANAGER,
        (crate::spec::EC2_PROVIDER, Role::Worker) => EC2_WORKER,
        (crate::spec::EC2_PROVIDER, Role::Plain) => EC2_HEAD,
        (crate::spec::SSH_PROVIDER, Role::Manager) => SSH_MANAGER,
        (crate::spec::SSH_PROVIDER, Role::Worker) => SSH_WORKER,
        (_, Role::Manager) => include_str!("../templates/manager.sh.j2"),
        (_, Role::Worker) => include_str!("../templates/worker.sh.j2"),
        (_, Role::Plain) => include_str!("../templates/plain.sh.j2"),
    }
}

/// Every incus machine's script starts so: the secret environment read
/// and deleted, the address found, the engine labelled and restarted.
const INCUS_HEAD: &str = include_str!("../templates/incus/head.sh.j2");
/// An incus worker's: the head, then the join.
const INCUS_WORKER: &str = concat!(
    include_str!("../templates/incus/head.sh.j2"),
    include_str!("../templates/incus/worker.sh.j2"),
);
/// An incus manager's: the head, the controller's systemd unit as shipped
/// in `deploy/systemd/` (one file, two uses) installed and started, then
/// the swarm init or join.
const INCUS_MANAGER: &str = concat!(
    include_str!("../templates/incus/head.sh.j2"),
    include_str!("../templates/incus/manager.sh.j2"),
    include_str!("../../../deploy/systemd/drover-controller.service"),
    include_str!("../templates/incus/manager-end.sh.j2"),
);

/// Every ec2 instance's script starts so: the address found (its logical
/// id, else the metadata service's), the engine labelled and restarted.
/// Nothing secret: user data stays readable for the instance's life.
const EC2_HEAD: &str = include_str!("../templates/ec2/head.sh.j2");
/// An ec2 worker's: the head, then the join (as on incus machines).
const EC2_WORKER: &str = concat!(
    include_str!("../templates/ec2/head.sh.j2"),
    include_str!("../templates/incus/worker.sh.j2"),
);
/// An ec2 manager's: the head, the controller's unit, the init or join
/// (as on incus machines).
const EC2_MANAGER: &str = concat!(
    include_str!("../templates/ec2/head.sh.j2"),
    include_str!("../templates/incus/manager.sh.j2"),
    include_str!("../../../deploy/systemd/drover-controller.service"),
    include_str!("../templates/incus/manager-end.sh.j2"),
);

/// An ssh worker's: drover's labels merged into the host's own engine
/// configuration (kept, to be returned at release), then the join (as on
/// incus machines). A plain host's is the generic one: no engine to label.
const SSH_WORKER: &str = concat!(
    include_str!("../templates/ssh/head.sh.j2"),
    include_str!("../templates/incus/worker.sh.j2"),
);
/// An ssh manager's: the head, the controller's unit (its settings the
/// ssh provider's), the init or join (as on incus machines).
const SSH_MANAGER: &str = concat!(
    include_str!("../templates/ssh/head.sh.j2"),
    include_str!("../templates/ssh/manager.sh.j2"),
    include_str!("../../../deploy/systemd/drover-controller.service"),
    include_str!("../templates/incus/manager-end.sh.j2"),
);

/// Environment variables as `export KEY='value'` lines for `sh`, values
/// quoted: how a provider hands a boot script its environment where it
/// cannot set the process environment itself (a file the script sources on
/// incus machines, the head of EC2 user data).
pub fn sh_exports<'a>(env: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (k, v) in env {
        let quoted = v.replace('\'', r"'\''");
        out.push_str(&format!("export {k}='{quoted}'\n"));
    }
    out
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
    /// Every reachable manager's address, `join_addr` first, comma
    /// separated: what `drover engine join --remote` tries in turn.
    pub join_addrs: String,
    /// True for the very first manager of a new swarm.
    pub init: bool,
    /// Engine labels to put on the engine, drover's own included.
    pub engine_labels: BTreeMap<String, String>,
    /// The drover release to install (`flavor.drover`), or empty: the
    /// image holds drover.
    pub drover_url: String,
    /// Its SHA-256 (hex), or empty.
    pub drover_sha256: String,
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
            join_addrs: "127.0.0.11:2377,127.0.0.12:2377".into(),
            init: false,
            engine_labels: BTreeMap::new(),
            drover_url: String::new(),
            drover_sha256: String::new(),
        }
    }

    /// This context, installing `release` (if any).
    pub fn with_release(self, release: Option<&crate::spec::DroverRelease>) -> Self {
        let (drover_url, drover_sha256) = release
            .map(|r| (r.url.clone(), r.sha256.clone()))
            .unwrap_or_default();
        BootContext {
            drover_url,
            drover_sha256,
            ..self
        }
    }
}

/// The most a boot script may render to: far above any real script (an
/// EC2 instance takes at most 16 KiB of user data), small enough that
/// `validate` can never be made to allocate without end.
pub const MAX_OUTPUT_BYTES: usize = 1 << 20;

/// The most work one render may do, in the template engine's fuel: one
/// step per instruction and one per 64 bytes of data a template makes.
/// The built-in scripts use a small fraction; this bounds both the time a
/// render takes (a loop of a billion turns stops within milliseconds) and
/// the memory it may allocate (about 6 MiB of values).
pub const MAX_STEPS: u64 = 100_000;

/// The deepest a render may nest (loops, blocks, macro calls): a macro that
/// calls itself stops here instead of exhausting the stack.
pub const MAX_DEPTH: usize = 64;

/// Which render bound a template exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// More than [`MAX_OUTPUT_BYTES`] of output.
    Output,
    /// More than [`MAX_STEPS`] steps.
    Steps,
    /// Nested deeper than [`MAX_DEPTH`].
    Depth,
}

impl std::fmt::Display for Bound {
    /// What the template did, then (after its position) the bound.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bound::Output => "the template renders too much",
            Bound::Steps => "the template takes too many steps",
            Bound::Depth => "the template nests too deep",
        })
    }
}

impl Bound {
    /// The bound itself, as the operator may stay within it.
    fn limit(self) -> String {
        match self {
            Bound::Output => format!("a boot script may render at most {MAX_OUTPUT_BYTES} bytes"),
            Bound::Steps => format!(
                "a render may take at most {MAX_STEPS} steps (one per instruction \
                 or per 64 bytes of data it makes)"
            ),
            Bound::Depth => {
                format!("a render may nest at most {MAX_DEPTH} levels (loops, blocks, macro calls)")
            }
        }
    }
}

/// Why a template does not render, with where in the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// The kind of problem, as the template engine names it ("syntax error").
    pub kind: String,
    /// The engine's detail, when it gives one ("unexpected end of input").
    pub detail: Option<String>,
    /// The failing expression as written (`join_token`), when known.
    pub expr: Option<String>,
    /// 1-based line and column in the template, when known.
    pub at: Option<(usize, usize)>,
    /// True when the template uses a variable that is not defined.
    pub undefined: bool,
    /// The render bound the template exceeded, if that is why it failed.
    pub bound: Option<Bound>,
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.expr, self.undefined, self.bound) {
            (_, _, Some(bound)) => {
                write!(f, "{bound}")?;
                if let Some(expr) = &self.expr {
                    write!(f, " at `{expr}`")?;
                }
            }
            (Some(expr), true, None) => write!(f, "`{expr}` is undefined")?,
            _ => {
                write!(f, "{}", self.kind)?;
                if let Some(detail) = &self.detail {
                    write!(f, ": {detail}")?;
                }
                if let Some(expr) = &self.expr {
                    write!(f, " at `{expr}`")?;
                }
            }
        }
        if let Some((line, col)) = self.at {
            write!(f, " (template line {line}, column {col})")?;
        }
        match self.bound {
            Some(bound) => write!(f, "; {}", bound.limit()),
            None => Ok(()),
        }
    }
}

impl std::error::Error for TemplateError {}

/// Renders `template` with `ctx`. Unknown variables are errors, so a typo in
/// a template is caught by `validate` rather than at 3 a.m. on a new machine.
/// Every render runs under the bounds above, so no template (however it is
/// written) can make a command allocate or loop without end.
pub fn render(template: &str, ctx: &BootContext) -> Result<String, TemplateError> {
    render_value(template, ctx)
}

/// [`render`] with any facts (an in-place update's command has its own:
/// [`crate::in_place::UpdateContext`]), under the same rules and bounds.
pub fn render_value<T: serde::Serialize>(template: &str, ctx: &T) -> Result<String, TemplateError> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Debug mode keeps the failing expression's span, for the message.
    env.set_debug(true);
    env.set_fuel(Some(MAX_STEPS));
    env.set_recursion_limit(MAX_DEPTH);
    env.add_template("boot", template)
        .map_err(|e| describe(&e, template, None))?;
    let mut out = Bounded::default();
    match env
        .get_template("boot")
        .and_then(|t| t.render_captured_to(minijinja::value::Serde(ctx), &mut out))
    {
        // The engine writes only `str`s, whole: the bytes are UTF-8.
        Ok(_) => Ok(String::from_utf8(out.bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())),
        Err(e) => Err(describe(
            &e,
            template,
            out.exceeded.then_some(Bound::Output),
        )),
    }
}

/// Output that refuses to grow past [`MAX_OUTPUT_BYTES`], and remembers
/// that it did, so the engine's write failure is reported as the bound.
#[derive(Default)]
struct Bounded {
    bytes: Vec<u8>,
    exceeded: bool,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_OUTPUT_BYTES {
            self.exceeded = true;
            return Err(std::io::Error::other("render output bound"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn describe(e: &minijinja::Error, template: &str, bound: Option<Bound>) -> TemplateError {
    let range = e.range().filter(|r| template.get(r.clone()).is_some());
    let at = match (&range, e.line()) {
        (Some(r), _) => {
            let before = &template[..r.start];
            let line = 1 + before.matches('\n').count();
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            Some((line, 1 + before[line_start..].chars().count()))
        }
        (None, Some(line)) => Some((line, 1)),
        (None, None) => None,
    };
    let undefined = e.kind() == minijinja::ErrorKind::UndefinedError;
    let bound = bound.or(match e.kind() {
        minijinja::ErrorKind::OutOfFuel => Some(Bound::Steps),
        minijinja::ErrorKind::InvalidOperation
            if e.detail() == Some("recursion limit exceeded") =>
        {
            Some(Bound::Depth)
        }
        _ => None,
    });
    TemplateError {
        kind: e.kind().to_string(),
        detail: e.detail().map(str::to_string),
        expr: range
            .map(|r| template[r].trim().to_string())
            .filter(|x| !x.is_empty()),
        at,
        undefined,
        bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_render_for_every_role() {
        for provider in crate::spec::PROVIDERS {
            for role in [Role::Manager, Role::Worker, Role::Plain] {
                let mut ctx = BootContext::example(role);
                render(default_boot_script(provider, role), &ctx).unwrap();
                ctx.init = true;
                render(default_boot_script(provider, role), &ctx).unwrap();
            }
        }
    }

    /// Every default script that joins hands its join every manager it
    /// was given (`join_addrs`), to try in turn, not the one `join_addr`
    /// (drover issue 36: an engine told to join through a manager cut off
    /// mid-join stayed in swarm state `error` for good).
    #[test]
    fn every_default_join_is_given_every_manager() {
        for provider in crate::spec::PROVIDERS {
            for role in [Role::Manager, Role::Worker] {
                let out = render(
                    default_boot_script(provider, role),
                    &BootContext::example(role),
                )
                .unwrap();
                assert!(
                    out.contains("--remote 127.0.0.11:2377,127.0.0.12:2377"),
                    "{provider} {role:?}: {out}"
                );
            }
        }
    }

    #[test]
    fn the_incus_manager_script_labels_its_engine_and_installs_the_controller_unit() {
        let mut ctx = BootContext::example(Role::Manager);
        ctx.engine_labels = BTreeMap::from([
            ("drover.link".to_string(), "op-1".to_string()),
            ("tier".to_string(), "a \"quoted\" one".to_string()),
        ]);
        let script = render(default_boot_script("incus", Role::Manager), &ctx).unwrap();
        assert!(script.starts_with("#!/bin/sh\n"), "{script}");
        assert!(
            script.contains(r#"{"labels": ["drover.link=op-1", "tier=a \"quoted\" one"]}"#),
            "{script}"
        );
        assert!(script.contains("--remote 127.0.0.11:2377"), "{script}");
        let unit = include_str!("../../../deploy/systemd/drover-controller.service");
        assert!(script.contains(unit), "the unit shipped in deploy/systemd/");
        assert!(script.contains("systemctl enable --now drover-controller.service"));
    }

    /// An ssh host's engine is the operator's: drover's labels are merged
    /// into its configuration (kept for the release, which returns it), the
    /// engine reloaded, and the controller's unit marked as drover's.
    #[test]
    fn the_ssh_manager_script_keeps_the_hosts_engine_configuration() {
        let mut ctx = BootContext::example(Role::Manager);
        ctx.engine_labels = BTreeMap::from([("drover.link".to_string(), "op-1".to_string())]);
        let script = render(default_boot_script("ssh", Role::Manager), &ctx).unwrap();
        let at = |needle: &str| {
            script
                .find(needle)
                .unwrap_or_else(|| panic!("{needle:?} missing in {script}"))
        };
        let kept = at("cp -p \"$conf\" \"$state/daemon.json.orig\"");
        let merged = at("labels='[\"drover.link=op-1\"]'");
        let reload = at("systemctl reload docker.service");
        let unit = at("systemctl enable --now drover-controller.service");
        let join = at("drover engine join --role manager");
        assert!(merged < kept && kept < reload && reload < unit && unit < join);
        assert!(script.contains(": >\"$state/controller.unit\""));
        assert!(script.contains("DROVER_STORE|DROVER_SSH_DIR"));
    }

    #[test]
    fn a_pinned_release_is_checked_and_installed_before_the_controller_or_the_join() {
        let release = crate::spec::DroverRelease {
            url: "https://releases.example/drover-0.2".into(),
            sha256: "ab".repeat(32),
        };
        for provider in ["incus", "ec2", "ssh"] {
            let ctx = BootContext::example(Role::Manager).with_release(Some(&release));
            let script = render(default_boot_script(provider, Role::Manager), &ctx).unwrap();
            let at = |needle: &str| {
                script
                    .find(needle)
                    .unwrap_or_else(|| panic!("{needle:?} missing in {script}"))
            };
            let fetch = at("-o \"$drover_new\" 'https://releases.example/drover-0.2'");
            let check = at(&format!(
                "echo \"{}  $drover_new\" | sha256sum -c --quiet -",
                release.sha256
            ));
            let install = at("install -m 0755 \"$drover_new\" /usr/local/bin/drover");
            let unit = at("systemctl enable --now drover-controller.service");
            let join = at("drover engine join");
            assert!(fetch < check && check < install && install < unit && unit < join);
            assert!(script.starts_with("#!/bin/sh\n"));
            // Without a pin, the image's drover is used.
            let plain = render(
                default_boot_script(provider, Role::Manager),
                &BootContext::example(Role::Manager),
            )
            .unwrap();
            assert!(!plain.contains("drover_new"), "{plain}");
        }
    }

    /// Renders `template`, which must exceed `bound`, within `within`.
    fn exceeds(template: &str, bound: Bound) -> TemplateError {
        let started = std::time::Instant::now();
        let e = render(template, &BootContext::example(Role::Manager)).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(e.bound, Some(bound), "{e}");
        e
    }

    #[test]
    fn output_past_the_bound_is_refused_before_it_is_allocated() {
        let e = exceeds(
            r#"{% for i in range(100000) %}{{ "x" * 100000 }}{% endfor %}"#,
            Bound::Output,
        );
        assert_eq!(
            e.to_string(),
            format!(
                "the template renders too much; a boot script may render at most {MAX_OUTPUT_BYTES} bytes"
            )
        );
    }

    #[test]
    fn a_loop_of_a_billion_turns_runs_out_of_steps() {
        let e = exceeds(
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
            Bound::Steps,
        );
        assert_eq!(
            e.to_string(),
            "the template takes too many steps at `range(100000)` (template line 1, column 41); \
             a render may take at most 100000 steps (one per instruction or per 64 bytes of data it makes)"
        );
    }

    #[test]
    fn one_huge_value_runs_out_of_steps_before_it_is_made() {
        let e = exceeds(r#"{{ "x" * 50000000 }}"#, Bound::Steps);
        assert_eq!(e.expr.as_deref(), Some(r#""x" * 50000000"#));
    }

    #[test]
    fn a_macro_calling_itself_stops_at_the_depth_bound() {
        let e = exceeds(
            "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
            Bound::Depth,
        );
        assert!(e.to_string().contains("at most 64 levels"), "{e}");
    }

    #[test]
    fn output_right_at_the_bound_renders_and_one_byte_more_does_not() {
        let at = format!(r#"{{{{ "x" * {MAX_OUTPUT_BYTES} }}}}"#);
        let ctx = BootContext::example(Role::Worker);
        assert_eq!(render(&at, &ctx).unwrap().len(), MAX_OUTPUT_BYTES);
        exceeds(&format!("{at}."), Bound::Output);
    }

    #[test]
    fn unknown_variable_is_an_error() {
        let e = render("a\nb {{ nope }}", &BootContext::example(Role::Worker)).unwrap_err();
        assert!(e.undefined);
        assert_eq!(
            e.to_string(),
            "`nope` is undefined (template line 2, column 6)"
        );
    }
}
