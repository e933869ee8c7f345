//! What a member is made of: `instance` (provider, properties, plugin)
//! and `flavor` (boot script, engine labels).

use super::*;

impl Decoder<'_> {
    pub(super) fn instance(&mut self, node: &Node, path: &str) -> Option<InstanceSpec> {
        let f = self.fields(node, path, INSTANCE_FIELDS)?;
        let provider = self
            .required(&f, "provider", path, "the provider name (e.g. local)")
            .and_then(|n| {
                let path = join(path, "provider");
                let name = self.string(n, &path)?;
                self.known_provider(&name, n.pos(), &path).then_some(name)
            });
        let properties = match f.get("properties") {
            None => Some(serde_json::Value::Object(Default::default())),
            Some(p @ Node::Map { .. }) => Some(p.to_json()),
            Some(p) => {
                self.error(
                    p.pos(),
                    &join(path, "properties"),
                    format!("expected a mapping, found {}", p.kind()),
                );
                None
            }
        };
        let provider = provider?;
        let plugin = self.plugin_address(&f, &provider, path)?;
        Some(InstanceSpec {
            provider,
            properties: properties?,
            plugin,
        })
    }

    /// `instance.plugin`: required with `provider: plugin`, where it must
    /// be a usable `NAME[/TYPE]`; refused with any other provider.
    pub(super) fn plugin_address(
        &mut self,
        f: &Fields<'_>,
        provider: &str,
        path: &str,
    ) -> Option<Option<String>> {
        let at = join(path, "plugin");
        match (f.get("plugin"), provider == PLUGIN_PROVIDER) {
            (None, false) => Some(None),
            (None, true) => {
                self.error(
                    f.pos,
                    &at,
                    "`provider: plugin` needs `plugin: NAME[/TYPE]`, the plugin's socket name in the plugins directory".to_string(),
                );
                None
            }
            (Some(n), false) => {
                self.error(
                    n.pos(),
                    &at,
                    format!("only `provider: plugin` takes a plugin; this group's provider is `{provider}`"),
                );
                None
            }
            (Some(n), true) => {
                let name = self.string(n, &at)?;
                match PluginAddress::parse(&name) {
                    Ok(_) => Some(Some(name)),
                    Err(e) => {
                        self.error(n.pos(), &at, e.to_string());
                        None
                    }
                }
            }
        }
    }

    /// True when `name` is a provider this decoder accepts; else reports it.
    pub(super) fn known_provider(&mut self, name: &str, pos: Pos, path: &str) -> bool {
        let Some(known) = self.providers else {
            return true;
        };
        if known.contains(&name) {
            return true;
        }
        let hint = closest(name, known.iter().map(|k| k.to_string()))
            .map(|k| format!("did you mean `{k}`? "))
            .unwrap_or_default();
        self.error(
            pos,
            path,
            format!(
                "`{name}` is not a provider drover knows; {hint}the providers are: {}",
                known.join(", ")
            ),
        );
        false
    }

    pub(super) fn flavor(
        &mut self,
        node: Option<&Node>,
        path: &str,
        (role, provider): (Option<Role>, Option<&str>),
        group_pos: Pos,
    ) -> Option<FlavorSpec> {
        let expected = role.map(|r| {
            if r == Role::Plain {
                FlavorKind::Vanilla
            } else {
                FlavorKind::Swarm
            }
        });
        let empty = Node::Map {
            entries: Vec::new(),
            pos: group_pos,
        };
        let f = self.fields(node.unwrap_or(&empty), path, FLAVOR_FIELDS)?;
        let kind = self.choice(
            f.get("kind"),
            &join(path, "kind"),
            &[
                ("swarm", FlavorKind::Swarm),
                ("vanilla", FlavorKind::Vanilla),
            ],
            expected.unwrap_or(FlavorKind::Swarm),
        );
        // An unknown kind hides none of the section's other problems.
        if let (Some(k), Some(expected), Some(role)) = (kind, expected, role)
            && k != expected
        {
            let at = f.get("kind").map_or(f.pos, Node::pos);
            let want = if expected == FlavorKind::Swarm {
                "swarm"
            } else {
                "vanilla"
            };
            self.error(
                at,
                &join(path, "kind"),
                format!(
                    "role {} needs flavor kind `{want}`; set kind: {want} or leave kind out",
                    role.as_str()
                ),
            );
        }
        let boot_script = match f.get("boot_script") {
            None => {
                role.map(|r| template::default_boot_script(provider.unwrap_or(""), r).to_string())
            }
            Some(n) => self.string(n, &join(path, "boot_script")),
        };
        let release = self.release(f.get("drover"), &join(path, "drover"), role);
        let rendered = match &boot_script {
            Some(script) => self.boot_script_renders(&f, path, script, role, release.as_ref()),
            None => Some(0),
        };
        if provider == Some(EC2_PROVIDER)
            && let Some(len) = rendered
            && let Err(e) = ec2::check_user_data(len + ec2::BOOT_ENV_RESERVE)
        {
            let at = f.get("boot_script").map_or(f.pos, Node::pos);
            self.error(at, &join(path, "boot_script"), format!(
                "renders to {len} bytes; with the {} bytes kept for the boot environment the ec2 provider adds, that is {e}",
                ec2::BOOT_ENV_RESERVE
            ));
        }
        let labels = match f.get("engine_labels") {
            None => Some(BTreeMap::new()),
            Some(n) => self.labels(n, &join(path, "engine_labels")),
        };
        (rendered.is_some() && kind == expected).then_some(())?;
        Some(FlavorSpec {
            kind: expected?,
            boot_script: boot_script?,
            engine_labels: labels?,
            drover: release?,
        })
    }

    /// The boot script renders for a joining member and for the one that
    /// makes the swarm (else an error, at the failing expression itself
    /// when the script is a literal block): the longer rendering's length.
    fn boot_script_renders(
        &mut self,
        f: &Fields<'_>,
        path: &str,
        script: &str,
        role: Option<Role>,
        release: Option<&Option<DroverRelease>>,
    ) -> Option<usize> {
        let mut longest = 0;
        for init in [false, true] {
            let ctx = BootContext {
                init,
                ..BootContext::example(role.unwrap_or(Role::Worker))
            }
            .with_release(release.and_then(Option::as_ref));
            let e = match template::render(script, &ctx) {
                Ok(text) => {
                    longest = longest.max(text.len());
                    continue;
                }
                Err(e) => e,
            };
            // At the failing expression itself when the script is a
            // literal block, else at the script.
            let at = f.get("boot_script").map_or(f.pos, |n| {
                e.at.and_then(|(line, col)| n.inner_pos(line, col))
                    .unwrap_or(n.pos())
            });
            self.error(
                at,
                &join(path, "boot_script"),
                if e.undefined {
                    format!("template does not render: {e}; templates may use only {TEMPLATE_VARIABLES} (the join token is never a variable: the script reads $DROVER_JOIN_TOKEN)")
                } else {
                    format!("template does not render: {e}")
                },
            );
            return None;
        }
        Some(longest)
    }

    /// Engine labels the group's provider can carry: the local provider
    /// passes each as one process argument ([`crate::spec::local`]). Read
    /// from the file as written, whatever the flavor's other problems.
    pub(super) fn carried_labels(&mut self, group: &Node, path: &str, inst: &InstanceSpec) {
        let Some(Node::Map { entries, .. }) = node_at(group, &["flavor", "engine_labels"]) else {
            return;
        };
        if inst.provider != LOCAL_PROVIDER {
            return;
        }
        let labels: BTreeMap<String, String> = entries
            .iter()
            .filter_map(|(k, _, v)| match v {
                Node::Scalar { value, .. } => Some((k.clone(), value.clone())),
                _ => None,
            })
            .collect();
        let at = join(path, "flavor.engine_labels");
        for problem in crate::spec::local::label_problems(&labels) {
            let (pos, field) = match &problem {
                crate::spec::local::LabelTooLong::One { key, .. } => (
                    field_pos(group, &["flavor", "engine_labels", key]),
                    join(&at, key),
                ),
                crate::spec::local::LabelTooLong::All { .. } => {
                    (field_pos(group, &["flavor", "engine_labels"]), at.clone())
                }
            };
            self.error(pos.unwrap_or(group.pos()), &field, problem.to_string());
        }
    }

    pub(super) fn labels(&mut self, node: &Node, path: &str) -> Option<BTreeMap<String, String>> {
        let Node::Map { entries, .. } = node else {
            self.error(
                node.pos(),
                path,
                format!("expected a mapping of label: value, found {}", node.kind()),
            );
            return None;
        };
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (k, kpos, v) in entries {
            let p = join(path, k);
            if k.starts_with("drover.") {
                self.error(
                    *kpos,
                    &p,
                    "labels starting with `drover.` are reserved for drover's own bookkeeping",
                );
                ok = false;
            } else if let Node::Scalar { value, .. } = v {
                out.insert(k.clone(), value.clone());
            } else {
                self.error(
                    v.pos(),
                    &p,
                    format!("label values must be strings, found {}", v.kind()),
                );
                ok = false;
            }
        }
        ok.then_some(out)
    }
}
