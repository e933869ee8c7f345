//! One instance as EC2 is asked to launch it, and as drover reads it
//! back: pure translations between drover's requests and EC2's Query API
//! parameters and answers, and the window in which an instance EC2 just
//! launched may still be missing from its describes.

use crate::xml::Described;
use drover_core::model::Instance;
use drover_core::spec::ec2::Ec2Properties;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// The states of an instance that still exists: `shutting-down` and
/// `terminated` ones are gone (never listed, so never counted).
pub const LIVE_STATES: [&str; 4] = ["pending", "running", "stopping", "stopped"];
/// How long an instance `RunInstances` returned is trusted to exist while
/// describes do not list it yet (EC2 is eventually consistent: minutes at
/// worst, seconds usually).
pub const YOUNG_WINDOW: Duration = Duration::from_secs(300);

/// What a launch is made of, besides the properties. Its `Debug` leaves
/// the user data out (it holds the boot environment).
#[derive(Clone)]
pub struct Launch<'a> {
    /// The properties.
    pub props: &'a Ec2Properties,
    /// drover's tags, put on the instance and its volumes at launch.
    pub tags: &'a BTreeMap<String, String>,
    /// The slot's zone, if any (its subnet is the properties').
    pub zone: Option<&'a str>,
    /// A pet's private IPv4 address.
    pub private_ip: Option<&'a str>,
    /// The rendered boot script.
    pub user_data: &'a str,
    /// The idempotency token.
    pub client_token: &'a str,
}

impl std::fmt::Debug for Launch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("props", &self.props)
            .field("tags", &self.tags)
            .field("zone", &self.zone)
            .field("private_ip", &self.private_ip)
            .field(
                "user_data",
                &format_args!("<{} bytes>", self.user_data.len()),
            )
            .field("client_token", &self.client_token)
            .finish()
    }
}

/// Why a request cannot become an instance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    /// The user data is over EC2's limit (the rule `validate` applies,
    /// [`drover_core::spec::ec2::check_user_data`]).
    #[error("group {group:?}: the rendered boot script and its environment are {source}")]
    UserDataTooLarge {
        /// The group.
        group: String,
        /// How long it is.
        source: drover_core::spec::ec2::UserDataTooLarge,
    },
    /// A pet's id must be a private IPv4 address.
    #[error(
        "logical id {0:?} is not a private IPv4 address: an ec2 pet's logical id is its address in its zone's subnet"
    )]
    LogicalId(String),
    /// A pet's address needs a subnet to be in.
    #[error(
        "logical id {id} needs a subnet: instance.properties.subnets has none for zone `{zone}`"
    )]
    NoSubnet {
        /// The logical id.
        id: String,
        /// The zone (or `default`).
        zone: String,
    },
    /// A boot environment cannot be put in front of a script that is not
    /// a shell script.
    #[error(
        "group {group:?}: the boot script must start with #!/bin/sh or #!/bin/bash: the ec2 provider gives it its environment as export lines after that line"
    )]
    NotShell {
        /// The group.
        group: String,
    },
    /// A boot environment variable that may not be placed in user data.
    #[error(
        "group {group:?}: the ec2 provider cannot give the boot script {names} without putting it in user data, which stays readable for the instance's life; see docs/ec2.md, \"Secrets\""
    )]
    UnplaceableEnv {
        /// The group.
        group: String,
        /// The variables (never their values).
        names: String,
    },
    /// Launches are made idempotent on the operation's link tag.
    #[error("the request carries no drover.link tag: it cannot be made idempotent")]
    NoLink,
}

/// The boot environment variables that may go in user data, and why:
/// - `DROVER_JOIN_TOKEN`: the controller rotates the role's token once no
///   machine given it still awaits its join (`drover_core::join_token`),
///   so the copy left readable is useless;
/// - `DROVER_STORE`: configuration, not a secret. A store address carries
///   no credential (the store refuses a `password` in it; an etcd
///   password comes from `DROVER_ETCD_PASSWORD`, and TLS material is named
///   by path): credentials reach a manager's controller from its image
///   or instance profile, never from user data;
/// - `DROVER_EC2`, `AWS_REGION`, `DROVER_EC2_ENDPOINT`: the provider's own
///   settings for a manager's controller, configuration too.
///
/// Anything else is refused ([`Unfit::UnplaceableEnv`]).
pub const PLACEABLE_ENV: [&str; 5] = [
    "DROVER_JOIN_TOKEN",
    "DROVER_STORE",
    "DROVER_EC2",
    "AWS_REGION",
    "DROVER_EC2_ENDPOINT",
];

/// The user data: the rendered boot script with its environment as
/// `export` lines right after its first line (the interpreter line), so
/// cloud-init runs it with that environment. Refused when a variable is
/// not one of [`PLACEABLE_ENV`], naming the variables, never their values.
pub fn user_data(group: &str, script: &str, env: &[(&str, &str)]) -> Result<String, Unfit> {
    let unplaceable: Vec<&str> = env
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !PLACEABLE_ENV.contains(k))
        .collect();
    if !unplaceable.is_empty() {
        return Err(Unfit::UnplaceableEnv {
            group: group.to_string(),
            names: unplaceable.join(", "),
        });
    }
    if env.is_empty() {
        return Ok(script.to_string());
    }
    // Exports fit a shell script only: in front of `#cloud-config` or a
    // MIME header, cloud-init would no longer know the format and run
    // nothing.
    let (first, rest) = match script.split_once('\n') {
        Some((first, rest)) if is_shell(first) => (format!("{first}\n"), rest),
        _ => {
            return Err(Unfit::NotShell {
                group: group.to_string(),
            });
        }
    };
    let exports = drover_core::template::sh_exports(env.iter().copied());
    Ok(format!(
        "{first}# The boot environment (docs/ec2.md, \"Secrets\"): the join token is rotated once this machine joined.\n{exports}{rest}"
    ))
}

/// `#!/bin/sh` or `#!/bin/bash` (with arguments or not).
fn is_shell(first: &str) -> bool {
    let interpreter = first
        .strip_prefix("#!")
        .map(str::trim_start)
        .unwrap_or_default();
    [
        "/bin/sh",
        "/bin/bash",
        "/usr/bin/env sh",
        "/usr/bin/env bash",
    ]
    .iter()
    .any(|i| interpreter == *i || interpreter.starts_with(&format!("{i} ")))
}

/// The launch's `ClientToken`: a hash of the cluster and the journal's
/// operation (its link), 64 hex characters (EC2 takes at most 64 ASCII),
/// the same on every retry of the operation, by any controller.
pub fn client_token(cluster: &str, link: &str) -> String {
    let mut h = Sha256::new();
    h.update(cluster.as_bytes());
    h.update([0]);
    h.update(link.as_bytes());
    hex::encode(h.finalize())
}

/// `RunInstances`' parameters: exactly one instance, tagged at launch
/// (instance and volumes), never tagged later.
pub fn run_params(l: &Launch<'_>) -> Result<Vec<(String, String)>, Unfit> {
    use base64::Engine;
    let mut p: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: &str| p.push((k.to_string(), v.to_string()));
    put("MinCount", "1");
    put("MaxCount", "1");
    put("ClientToken", l.client_token);
    put(
        "UserData",
        &base64::engine::general_purpose::STANDARD.encode(l.user_data),
    );
    if let Some(t) = &l.props.launch_template {
        if let Some(id) = &t.id {
            put("LaunchTemplate.LaunchTemplateId", id);
        }
        if let Some(name) = &t.name {
            put("LaunchTemplate.LaunchTemplateName", name);
        }
        if let Some(v) = &t.version {
            put("LaunchTemplate.Version", v);
        }
    }
    if let Some(ami) = &l.props.image_id {
        put("ImageId", ami);
    }
    if let Some(t) = &l.props.instance_type {
        put("InstanceType", t);
    }
    let subnet = l.props.subnet_for(l.zone);
    if let Some(s) = subnet {
        put("SubnetId", s);
    }
    if let Some(ip) = l.private_ip {
        if drover_core::spec::ec2::private_ip(ip).is_none() {
            return Err(Unfit::LogicalId(ip.to_string()));
        }
        if subnet.is_none() {
            return Err(Unfit::NoSubnet {
                id: ip.to_string(),
                zone: l
                    .zone
                    .unwrap_or(drover_core::spec::ec2::DEFAULT_SUBNET)
                    .to_string(),
            });
        }
        put("PrivateIpAddress", ip);
    }
    for (i, sg) in l.props.security_groups.iter().enumerate() {
        put(&format!("SecurityGroupId.{}", i + 1), sg);
    }
    if let Some(k) = &l.props.key_name {
        put("KeyName", k);
    }
    if let Some(prof) = &l.props.iam_instance_profile {
        let field = if prof.starts_with("arn:") {
            "Arn"
        } else {
            "Name"
        };
        put(&format!("IamInstanceProfile.{field}"), prof);
    }
    for (n, resource) in ["instance", "volume"].iter().enumerate() {
        let spec = format!("TagSpecification.{}", n + 1);
        put(&format!("{spec}.ResourceType"), resource);
        for (i, (k, v)) in l.tags.iter().enumerate() {
            put(&format!("{spec}.Tag.{}.Key", i + 1), k);
            put(&format!("{spec}.Tag.{}.Value", i + 1), v);
        }
    }
    Ok(p)
}

/// The most instances EC2 lists per `DescribeInstances` page.
pub const MAX_PAGE: u32 = 1000;

/// One page (at most `page` instances, 5 to [`MAX_PAGE`]) of
/// `DescribeInstances` for the live instances carrying all of `tags`
/// (drover's cluster tag among them). The state filter goes first: an
/// implementation that applies the filters in order (moto does) then
/// passes over the terminated instances, which pile up during a roll,
/// before it looks up anyone's tags (10 % of moto's describe of 1000).
pub fn describe_params(
    tags: &BTreeMap<String, String>,
    page: u32,
    next_token: Option<&str>,
) -> Vec<(String, String)> {
    let mut p = vec![
        (
            "MaxResults".to_string(),
            page.clamp(5, MAX_PAGE).to_string(),
        ),
        ("Filter.1.Name".to_string(), "instance-state-name".into()),
    ];
    for (i, s) in LIVE_STATES.iter().enumerate() {
        p.push((format!("Filter.1.Value.{}", i + 1), s.to_string()));
    }
    for (n, (k, v)) in (2..).zip(tags) {
        p.push((format!("Filter.{n}.Name"), format!("tag:{k}")));
        p.push((format!("Filter.{n}.Value.1"), v.clone()));
    }
    if let Some(t) = next_token {
        p.push(("NextToken".into(), t.to_string()));
    }
    p
}

/// An instance as the planner sees it; `None` once it is going or gone.
/// A pending one counts as running (it is booting, as a local engine
/// still starting does); a stopping or stopped one as not.
pub fn instance(d: &Described) -> Option<Instance> {
    let running = match d.instance_state.name.as_str() {
        "pending" | "running" => true,
        "stopping" | "stopped" => false,
        _ => return None,
    };
    let created_ms = d
        .launch_time
        .as_deref()
        .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    Some(Instance {
        id: d.instance_id.clone(),
        tags: d.tags().into(),
        running,
        created_ms,
    })
}

/// Instances this process launched, kept for [`YOUNG_WINDOW`] (unless
/// terminated here): within it a describe that misses one is not taken to
/// mean it is gone, which would have it launched again — also after a
/// describe listed it once, as EC2's eventually consistent reads may list
/// an instance and miss it on the next.
#[derive(Debug, Default)]
pub struct Young {
    launched: HashMap<String, (Instance, Instant)>,
}

impl Young {
    /// Remembers `instance`, launched at `now`.
    pub fn launched(&mut self, instance: Instance, now: Instant) {
        self.launched.insert(instance.id.clone(), (instance, now));
    }

    /// Forgets `id` (terminated).
    pub fn forget(&mut self, id: &str) {
        self.launched.remove(id);
    }

    /// True when `id` was launched here within the window.
    pub fn holds(&self, id: &str, now: Instant) -> bool {
        self.launched
            .get(id)
            .is_some_and(|(_, at)| now.saturating_duration_since(*at) < YOUNG_WINDOW)
    }

    /// Adds to `listed` (a describe's answer for `tags`) the young
    /// instances it misses that carry `tags`, as last listed (or as
    /// launched); forgets those past the window.
    pub fn complete(
        &mut self,
        listed: &mut Vec<Instance>,
        tags: &BTreeMap<String, String>,
        now: Instant,
    ) {
        self.launched
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < YOUNG_WINDOW);
        let seen: std::collections::HashSet<String> = listed.iter().map(|i| i.id.clone()).collect();
        for i in listed.iter() {
            if let Some((kept, _)) = self.launched.get_mut(&i.id) {
                *kept = i.clone();
            }
        }
        listed.extend(
            self.launched
                .values()
                .filter(|(i, _)| !seen.contains(&i.id))
                .filter(|(i, _)| tags.iter().all(|(k, v)| i.tag(k) == Some(v)))
                .map(|(i, _)| i.clone()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_environment_goes_after_the_interpreter_line_and_nothing_else_is_placed() {
        let env = [
            ("DROVER_JOIN_TOKEN", "SWMTKN-1-a'b"),
            ("DROVER_STORE", "etcd://10.0.0.1:2379"),
        ];
        let data = user_data("w", "#!/bin/sh\nset -eu\n", &env).unwrap();
        let lines: Vec<&str> = data.lines().collect();
        assert_eq!(lines[0], "#!/bin/sh");
        assert_eq!(lines[2], r"export DROVER_JOIN_TOKEN='SWMTKN-1-a'\''b'");
        assert_eq!(lines[4], "set -eu");
        assert_eq!(user_data("w", "#!/bin/sh\n", &[]).unwrap(), "#!/bin/sh\n");
        // Exports only in front of a shell script.
        let token = [("DROVER_JOIN_TOKEN", "SWMTKN-1-x")];
        for script in [
            "#cloud-config\nruncmd: []\n",
            "Content-Type: multipart/mixed\n",
            "#!/usr/bin/python3\n",
        ] {
            let e = user_data("w", script, &token).unwrap_err();
            assert!(matches!(e, Unfit::NotShell { .. }), "{script}: {e}");
        }
        assert!(user_data("w", "#!/bin/bash -eu\n", &token).is_ok());
        let e = user_data("w", "#!/bin/sh\n", &[("API_KEY", "hunter2")]).unwrap_err();
        assert!(
            e.to_string().contains("API_KEY") && !e.to_string().contains("hunter2"),
            "{e}"
        );
    }
    use drover_core::spec::ec2::LaunchTemplate;

    fn props() -> Ec2Properties {
        Ec2Properties {
            region: Some("eu-west-1".into()),
            image_id: Some("ami-12345678".into()),
            instance_type: Some("t3.micro".into()),
            subnets: BTreeMap::from([("a".into(), "subnet-12345678".into())]),
            security_groups: vec!["sg-12345678".into()],
            iam_instance_profile: Some("arn:aws:iam::1:instance-profile/p".into()),
            launch_template: Some(LaunchTemplate {
                name: Some("lt".into()),
                version: Some("$Latest".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_launch_is_one_instance_tagged_at_launch_with_its_token() {
        let props = props();
        let tags = BTreeMap::from([("drover.link".to_string(), "op-1".to_string())]);
        let token = client_token("c1", "op-1");
        assert_eq!(token.len(), 64);
        assert_eq!(token, client_token("c1", "op-1"));
        assert_ne!(token, client_token("c2", "op-1"));
        let l = Launch {
            props: &props,
            tags: &tags,
            zone: Some("a"),
            private_ip: Some("10.0.0.5"),
            user_data: "#!/bin/sh\n",
            client_token: &token,
        };
        let p: BTreeMap<String, String> = run_params(&l).unwrap().into_iter().collect();
        for (k, v) in [
            ("MinCount", "1"),
            ("MaxCount", "1"),
            ("UserData", "IyEvYmluL3NoCg=="),
            ("SubnetId", "subnet-12345678"),
            ("PrivateIpAddress", "10.0.0.5"),
            ("SecurityGroupId.1", "sg-12345678"),
            (
                "IamInstanceProfile.Arn",
                "arn:aws:iam::1:instance-profile/p",
            ),
            ("LaunchTemplate.LaunchTemplateName", "lt"),
            ("LaunchTemplate.Version", "$Latest"),
            ("TagSpecification.1.ResourceType", "instance"),
            ("TagSpecification.2.ResourceType", "volume"),
            ("TagSpecification.2.Tag.1.Key", "drover.link"),
            ("TagSpecification.2.Tag.1.Value", "op-1"),
        ] {
            assert_eq!(p.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert_eq!(p["ClientToken"], token);
        let no_subnet = Launch {
            zone: Some("b"),
            ..l.clone()
        };
        assert!(matches!(
            run_params(&no_subnet),
            Err(Unfit::NoSubnet { .. })
        ));
        let bad = Launch {
            private_ip: Some("db-1"),
            ..l
        };
        assert!(matches!(run_params(&bad), Err(Unfit::LogicalId(_))));
    }

    #[test]
    fn describes_filter_on_tags_and_live_states() {
        let tags = BTreeMap::from([("drover.cluster".to_string(), "c1".to_string())]);
        let p: BTreeMap<String, String> = describe_params(&tags, 5000, Some("t"))
            .into_iter()
            .collect();
        assert_eq!(p["Filter.1.Name"], "instance-state-name");
        assert_eq!(p["Filter.1.Value.4"], "stopped");
        assert_eq!(p["Filter.2.Name"], "tag:drover.cluster");
        assert_eq!(p["Filter.2.Value.1"], "c1");
        assert_eq!(p["NextToken"], "t");
        assert_eq!(p["MaxResults"], "1000");
    }

    #[test]
    fn a_young_instance_counts_for_the_whole_window_unless_terminated_here() {
        let t0 = Instant::now();
        let tags = BTreeMap::from([("drover.cluster".to_string(), "c1".to_string())]);
        let i = Instance {
            id: "i-1".into(),
            tags: tags.clone().into(),
            running: true,
            created_ms: 0,
        };
        let mut young = Young::default();
        young.launched(i.clone(), t0);
        let mut listed = Vec::new();
        young.complete(&mut listed, &tags, t0);
        assert_eq!(listed, vec![i.clone()]);
        let other = BTreeMap::from([("drover.cluster".to_string(), "c2".to_string())]);
        let mut listed = Vec::new();
        young.complete(&mut listed, &other, t0);
        assert!(listed.is_empty());
        let mut listed = Vec::new();
        young.complete(&mut listed, &tags, t0 + YOUNG_WINDOW);
        assert!(listed.is_empty() && !young.holds("i-1", t0));
        young.launched(i.clone(), t0);
        let mut listed = vec![i.clone()];
        young.complete(&mut listed, &tags, t0);
        assert_eq!(listed.len(), 1, "listed once, not twice");
        // Listed once, then missed by an eventually consistent read: still
        // there (a miss would otherwise launch a second machine).
        let mut listed = Vec::new();
        young.complete(&mut listed, &tags, t0);
        assert_eq!(listed, vec![i.clone()]);
        assert!(young.holds("i-1", t0));
        young.forget("i-1");
        let mut listed = Vec::new();
        young.complete(&mut listed, &tags, t0);
        assert!(listed.is_empty(), "terminated here: forgotten");
    }
}
