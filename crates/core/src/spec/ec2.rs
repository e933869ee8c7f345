//! A group's `instance.properties` for the ec2 provider, and the checks
//! that need no AWS call: `drover validate` runs them (so a misspelt AMI id
//! or a zone with no subnet is refused before anything is launched) and
//! the provider parses the same type before every launch. What only AWS
//! knows (does the AMI exist, is the subnet in that zone) the provider
//! reports with AWS's own error code.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// The ec2 provider's instance properties (docs/ec2.md). Unknown fields
/// are errors, so a misspelt `instace_type` is not silently ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ec2Properties {
    /// The region (required; must be the controller's `--ec2-region`).
    pub region: Option<String>,
    /// The AMI (`ami-` and 8 or 17 hex digits); required unless the launch
    /// template gives one.
    pub image_id: Option<String>,
    /// The instance type (`t3.micro`); required unless the launch template
    /// gives one.
    pub instance_type: Option<String>,
    /// The subnet of each of the group's zones (`zone: subnet-…`); the key
    /// `default` serves slots without a zone.
    pub subnets: BTreeMap<String, String>,
    /// Security group ids (`sg-…`) of the instance's network interface.
    pub security_groups: Vec<String>,
    /// The EC2 key pair's name (SSH access), if any.
    pub key_name: Option<String>,
    /// The IAM instance profile, by name or ARN.
    pub iam_instance_profile: Option<String>,
    /// A launch template as the base: what the properties above give
    /// overrides it.
    pub launch_template: Option<LaunchTemplate>,
}

/// A launch template, by id or by name, and its version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchTemplate {
    /// `lt-…`.
    pub id: Option<String>,
    /// The template's name.
    pub name: Option<String>,
    /// A version number, `$Latest` or `$Default` (EC2's default when absent).
    pub version: Option<String>,
}

/// The `subnets` key for slots that have no zone.
pub const DEFAULT_SUBNET: &str = "default";

pub use super::props::BadProperty;
use super::props::Reader;

/// The fields of [`Ec2Properties`], as written.
const FIELDS: &[&str] = &[
    "region",
    "image_id",
    "instance_type",
    "subnets",
    "security_groups",
    "key_name",
    "iam_instance_profile",
    "launch_template",
];
/// Where the properties are documented.
const DOC: &str = "docs/ec2.md";

impl Ec2Properties {
    /// Reads `value` (the group's opaque properties) and checks what can be
    /// checked offline; `zones` are the zones the group's slots use (None
    /// for a slot without one). Every problem is returned, not the first.
    pub fn parse(
        value: &serde_json::Value,
        zones: &[Option<&str>],
    ) -> Result<Ec2Properties, Vec<BadProperty>> {
        let mut r = Reader::open(value, "", FIELDS, DOC);
        let launch_template = r.raw("launch_template").map(|v| {
            let mut t = Reader::open(v, ".launch_template", &["id", "name", "version"], DOC);
            let template = LaunchTemplate {
                id: t.get("id"),
                name: t.get("name"),
                version: t.get("version"),
            };
            r.problems.extend(t.problems);
            template
        });
        let props = Ec2Properties {
            region: r.get("region"),
            image_id: r.get("image_id"),
            instance_type: r.get("instance_type"),
            subnets: r.get("subnets").unwrap_or_default(),
            security_groups: r.get("security_groups").unwrap_or_default(),
            key_name: r.get("key_name"),
            iam_instance_profile: r.get("iam_instance_profile"),
            launch_template,
        };
        // A field already refused for its type is not also called missing.
        for p in props.problems(zones) {
            if !r.problems.iter().any(|q| q.field == p.field) {
                r.problems.push(p);
            }
        }
        r.finish(props)
    }

    /// The subnet a slot in `zone` is launched in, if the properties name one.
    pub fn subnet_for(&self, zone: Option<&str>) -> Option<&str> {
        self.subnets
            .get(zone.unwrap_or(DEFAULT_SUBNET))
            .map(String::as_str)
    }

    fn problems(&self, zones: &[Option<&str>]) -> Vec<BadProperty> {
        let mut out = Vec::new();
        let mut bad = |field: String, problem: String| {
            out.push(BadProperty {
                field: format!(".{field}"),
                problem,
            })
        };
        self.machine_problems(&mut bad);
        self.network_problems(zones, &mut bad);
        self.access_problems(&mut bad);
        out
    }

    /// Where and on what it runs: region, image and instance type.
    fn machine_problems(&self, bad: &mut impl FnMut(String, String)) {
        match &self.region {
            // Required: a controller started in another region would
            // describe nothing there and read the group as empty.
            None => bad(
                "region".into(),
                "required: the region the group's instances live in (the controller's --ec2-region must be the same)".into(),
            ),
            Some(region) if !is_region(region) => bad(
                "region".into(),
                format!("`{region}` is not an AWS region name (e.g. eu-west-1)"),
            ),
            Some(_) => {}
        }
        let template = self.launch_template.as_ref();
        match &self.image_id {
            Some(ami) if !is_id(ami, "ami") => bad(
                "image_id".into(),
                format!("`{ami}` is not an AMI id: `ami-` and 8 or 17 hex digits"),
            ),
            None if template.is_none() => bad(
                "image_id".into(),
                "is required (or a launch_template that gives one)".into(),
            ),
            _ => {}
        }
        match &self.instance_type {
            Some(t) if !is_instance_type(t) => bad(
                "instance_type".into(),
                format!("`{t}` is not an instance type (family.size, e.g. t3.micro)"),
            ),
            None if template.is_none() => bad(
                "instance_type".into(),
                "is required (or a launch_template that gives one)".into(),
            ),
            _ => {}
        }
    }

    /// Its network: a subnet per zone used, and security group ids.
    fn network_problems(&self, zones: &[Option<&str>], bad: &mut impl FnMut(String, String)) {
        for (zone, subnet) in &self.subnets {
            if !is_id(subnet, "subnet") {
                bad(
                    format!("subnets.{zone}"),
                    format!("`{subnet}` is not a subnet id: `subnet-` and 8 or 17 hex digits"),
                );
            }
        }
        let mut missing: Vec<&str> = zones
            .iter()
            .filter(|z| self.subnet_for(**z).is_none())
            .map(|z| z.unwrap_or(DEFAULT_SUBNET))
            .collect();
        missing.dedup();
        // Without any subnet EC2 picks the default VPC's; a zone needs one.
        if !self.subnets.is_empty() || zones.iter().any(Option::is_some) {
            for zone in missing {
                bad(
                    "subnets".into(),
                    format!(
                        "no subnet for zone `{zone}`: each zone the group uses needs `{zone}: subnet-…`"
                    ),
                );
            }
        }
        for (i, sg) in self.security_groups.iter().enumerate() {
            if !is_id(sg, "sg") {
                bad(
                    format!("security_groups[{i}]"),
                    format!("`{sg}` is not a security group id: `sg-` and 8 or 17 hex digits"),
                );
            }
        }
    }

    /// How it is reached and what it may do: key pair, instance profile
    /// and launch template.
    fn access_problems(&self, bad: &mut impl FnMut(String, String)) {
        if self
            .key_name
            .as_deref()
            .is_some_and(|k| k.trim().is_empty())
        {
            bad(
                "key_name".into(),
                "is empty: name a key pair or leave it out".into(),
            );
        }
        if let Some(p) = &self.iam_instance_profile
            && (p.trim().is_empty() || (p.starts_with("arn:") && !p.contains(":instance-profile/")))
        {
            bad(
                "iam_instance_profile".into(),
                format!("`{p}` is neither a profile name nor an instance-profile ARN"),
            );
        }
        if let Some(t) = &self.launch_template {
            match (&t.id, &t.name) {
                (Some(_), Some(_)) | (None, None) => bad(
                    "launch_template".into(),
                    "name exactly one of `id` and `name`".into(),
                ),
                (Some(id), None) if !is_id(id, "lt") => bad(
                    "launch_template.id".into(),
                    format!("`{id}` is not a launch template id: `lt-` and 8 or 17 hex digits"),
                ),
                _ => {}
            }
            if let Some(v) = &t.version
                && !(v == "$Latest" || v == "$Default" || v.parse::<u64>().is_ok_and(|n| n > 0))
            {
                bad(
                    "launch_template.version".into(),
                    format!("`{v}` is not a version: a number, `$Latest` or `$Default`"),
                );
            }
        }
    }
}

/// EC2's limit on user data (before its base64 encoding).
pub const USER_DATA_LIMIT: usize = 16 * 1024;

/// What `validate` keeps free of [`USER_DATA_LIMIT`] for what the provider
/// adds to the rendered boot script: the boot environment as `export`
/// lines (the join token, the store's address, a manager's provider
/// settings) and one comment line. Only the provider knows their values;
/// together they are a few hundred bytes.
pub const BOOT_ENV_RESERVE: usize = 1024;

/// User data over EC2's limit: EC2 refuses the launch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{len} bytes of user data: EC2 takes at most {USER_DATA_LIMIT} bytes; shorten flavor.boot_script"
)]
pub struct UserDataTooLarge {
    /// The user data's length (for `validate`: the rendered script and
    /// [`BOOT_ENV_RESERVE`]).
    pub len: usize,
}

/// The one user-data rule: `validate` asks it of the rendered script plus
/// [`BOOT_ENV_RESERVE`], the provider of the user data it is about to send.
pub fn check_user_data(len: usize) -> Result<(), UserDataTooLarge> {
    if len > USER_DATA_LIMIT {
        Err(UserDataTooLarge { len })
    } else {
        Ok(())
    }
}

/// A pet's logical id on ec2: its private IPv4 address in its subnet.
pub fn private_ip(logical_id: &str) -> Option<Ipv4Addr> {
    logical_id
        .parse::<Ipv4Addr>()
        .ok()
        .filter(|a| never_assigned(*a).is_none())
}

/// Why EC2 can never give an instance the address `a`, if so: whatever
/// the subnet, these ranges are never in one (the subnet's own range,
/// and the addresses AWS reserves in it, only AWS knows).
pub fn never_assigned(a: Ipv4Addr) -> Option<&'static str> {
    let first = a.octets()[0];
    if a.is_loopback() {
        Some("127.0.0.0/8 is loopback")
    } else if first == 0 {
        Some("0.0.0.0/8 means this host or network, never an instance's address")
    } else if a.is_link_local() {
        Some(
            "169.254.0.0/16 is link-local: EC2's metadata service and DNS live there, never an instance",
        )
    } else if a.is_broadcast() {
        Some("255.255.255.255 is the broadcast address")
    } else if a.is_multicast() {
        Some("224.0.0.0/4 is multicast")
    } else if first >= 240 {
        Some("240.0.0.0/4 is reserved")
    } else {
        None
    }
}

/// `PREFIX-` and 8 or 17 lowercase hex digits, as EC2's resource ids are.
fn is_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('-'))
        .is_some_and(|hex| {
            (8..=17).contains(&hex.len())
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// `t3.micro`, `m7g.16xlarge`, `u-6tb1.metal`.
fn is_instance_type(s: &str) -> bool {
    let Some((family, size)) = s.split_once('.') else {
        return false;
    };
    let word = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    family.starts_with(|c: char| c.is_ascii_lowercase()) && word(family) && word(size)
}

/// `eu-west-1`, `us-gov-west-1`, `ap-southeast-4`.
fn is_region(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() >= 3
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].parse::<u8>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(value: serde_json::Value, zones: &[Option<&str>]) -> Vec<String> {
        match Ec2Properties::parse(&value, zones) {
            Ok(_) => Vec::new(),
            Err(problems) => problems.into_iter().map(|p| p.field).collect(),
        }
    }

    #[test]
    fn a_complete_group_passes() {
        let ok = json!({"region": "eu-west-1", "image_id": "ami-0abcdef1234567890",
            "instance_type": "t3.micro", "subnets": {"eu-west-1a": "subnet-12345678"},
            "security_groups": ["sg-0123456789abcdef0"], "key_name": "ops",
            "iam_instance_profile": "drover-node"});
        assert_eq!(fields(ok, &[Some("eu-west-1a")]), Vec::<String>::new());
        let template = json!({"region": "eu-west-1",
            "launch_template": {"name": "nodes", "version": "$Latest"}});
        assert_eq!(fields(template.clone(), &[None]), Vec::<String>::new());
        let mut nowhere = template;
        nowhere.as_object_mut().unwrap().remove("region");
        assert_eq!(
            fields(nowhere, &[None]),
            [".region"],
            "the region is required"
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let bad = json!({"region": "Europe", "image_id": "ami-XYZ", "instance_type": "big",
            "subnets": {"a": "net-1"}, "security_groups": ["default"], "key_name": " ",
            "iam_instance_profile": "arn:aws:iam::1:role/x",
            "launch_template": {"id": "lt-1", "version": "latest"}});
        assert_eq!(
            fields(bad, &[Some("a"), Some("b")]),
            [
                ".region",
                ".image_id",
                ".instance_type",
                ".subnets.a",
                ".subnets",
                ".security_groups[0]",
                ".key_name",
                ".iam_instance_profile",
                ".launch_template.id",
                ".launch_template.version"
            ]
        );
    }

    #[test]
    fn unknown_fields_and_a_missing_image_are_refused() {
        let e = Ec2Properties::parse(&json!({"instace_type": "t3.micro"}), &[]).unwrap_err();
        assert!(
            e[0].problem.contains("unknown field `instace_type`"),
            "{e:?}"
        );
        assert_eq!(
            fields(json!({}), &[None]),
            [".region", ".image_id", ".instance_type"]
        );
    }

    #[test]
    fn every_unknown_or_mistyped_field_is_named_at_once() {
        let bad = json!({"region": "eu-west-1", "imag_id": "ami-12345678", "instace_type": "t3.micro",
            "subnets": ["subnet-12345678"], "security_groups": "sg-12345678", "key_name": 7,
            "launch_template": {"nme": "x", "version": 3}});
        assert_eq!(
            fields(bad, &[None]),
            [
                ".imag_id",
                ".instace_type",
                ".launch_template.nme",
                ".launch_template.version",
                ".subnets",
                ".security_groups",
                ".key_name",
                ".launch_template"
            ]
        );
        let e = Ec2Properties::parse(&json!({"region": 5}), &[None]).unwrap_err();
        assert_eq!(
            e.iter().filter(|p| p.field == ".region").count(),
            1,
            "a mistyped field is not also missing: {e:?}"
        );
    }

    #[test]
    fn user_data_is_held_to_ec2s_limit() {
        assert_eq!(check_user_data(USER_DATA_LIMIT), Ok(()));
        let e = check_user_data(USER_DATA_LIMIT + 1).unwrap_err();
        assert!(e.to_string().contains("16384"), "{e}");
    }

    #[test]
    fn a_pets_id_is_a_private_ipv4_address() {
        assert!(private_ip("10.0.1.11").is_some());
        for bad in [
            "db-1",
            "127.0.0.1",
            "fe80::1",
            "0.0.0.0",
            "0.1.2.3",
            "169.254.169.254",
            "169.254.0.10",
            "224.0.0.1",
            "239.1.1.1",
            "255.255.255.255",
            "240.0.0.1",
        ] {
            assert!(private_ip(bad).is_none(), "{bad}");
        }
        for ok in ["10.0.0.4", "172.31.255.254", "192.168.1.1", "100.64.0.9"] {
            assert!(private_ip(ok).is_some(), "{ok}");
        }
    }
}
