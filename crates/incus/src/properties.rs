//! A group's `instance.properties` for the incus provider. The rule is
//! drover-core's ([`drover_core::spec::incus`]): `drover validate` runs
//! the same one, so the provider refuses at provision exactly what
//! validation refuses.

pub use drover_core::spec::incus::{ENGINE_DEVICE, IncusProperties as Properties};

/// The properties of a machine to make, for the slot with `logical_id`
/// (a pet needs `network`): every problem, as one permanent refusal
/// (retrying the same properties cannot help).
pub fn of_request(
    properties: &serde_json::Value,
    logical_id: Option<&str>,
) -> Result<Properties, drover_spi::ProviderError> {
    Properties::parse(properties, logical_id.is_some()).map_err(|problems| {
        drover_spi::ProviderError::Permanent(drover_core::spec::describe_properties(&problems))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::spec::{Severity, load_bytes};
    use drover_spi::ProviderError;
    use serde_json::{Value, json};

    const PET: &str = "10.203.60.21";

    /// The fields `drover validate` refuses in a group on incus with
    /// `props` (pets or cattle).
    fn validated(props: &Value, pets: bool) -> Vec<String> {
        let alloc = if pets {
            format!("{{logical_ids: [{PET}]}}")
        } else {
            "{size: 1}".to_string()
        };
        let file = format!(
            "groups:\n- name: w\n  role: worker\n  allocation: {alloc}\n  instance:\n    provider: incus\n    properties: {props}\n"
        );
        load_bytes(file.as_bytes())
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| {
                let field = d.path.strip_prefix("groups[0].instance.properties");
                field.unwrap_or_else(|| panic!("{props}: {}", d.render("F")))
            })
            .map(str::to_string)
            .collect()
    }

    /// What the provider says of the same properties before it creates a
    /// machine for the slot: `None` when it goes on.
    fn provisioned(props: &Value, pets: bool) -> Option<String> {
        match of_request(props, pets.then_some(PET)) {
            Ok(_) => None,
            Err(ProviderError::Permanent(m)) => Some(m),
            Err(e) => panic!("{props}: not a permanent refusal: {e}"),
        }
    }

    #[test]
    fn the_provider_refuses_at_provision_exactly_what_validate_refuses() {
        let cases = [
            json!({"image": "debian", "network": "br0"}),
            json!({"image": "debian"}),
            json!({"network": "br0"}),
            json!({"imgae": "debian", "network": "br0"}),
            json!({"image": " ", "network": "br0"}),
            json!({"image": 7}),
            json!({"image": "d", "network": "br0", "devices": {"eth0": {"type": "nic"}}}),
            json!({"image": "d", "devices": {"root": {"type": "disk"}, "drover-api": {"type": "proxy"}}}),
            json!({"image": "d", "devices": {"bin": {"source": "/x", "path": "/x"}}}),
            json!({"image": "d", "devices": {"bin": {"type": "disk", "source": "/x", "path": "/x"}}}),
            json!({"image": "d", "config": {"user.drover.cluster": "x", "limits.memory": "1GiB"}}),
            json!({"image": "d", "config": {"security.privileged": "false"}}),
            json!({"image": "d", "cpu": 0, "memory": "a lot"}),
            json!({"image": "d", "cpu": 2, "memory": "2GiB", "profiles": ["default"]}),
            json!({"image": "d", "profiles": [""], "storage_pool": ""}),
        ];
        let mut refused = 0;
        for props in &cases {
            for pets in [false, true] {
                let fields = validated(props, pets);
                let said = provisioned(props, pets);
                assert_eq!(
                    fields.is_empty(),
                    said.is_none(),
                    "{props} (pets: {pets}): validate {fields:?}, provider {said:?}"
                );
                let said = said.unwrap_or_default();
                for field in &fields {
                    assert!(
                        said.contains(&format!("instance.properties{field}:")),
                        "{props} (pets: {pets}): validate names {field}, the provider says {said}"
                    );
                }
                assert_eq!(
                    said.matches("instance.properties").count(),
                    fields.len(),
                    "{props} (pets: {pets}): {said}"
                );
                refused += usize::from(!fields.is_empty());
            }
        }
        assert!(refused >= 20, "the cases refuse something: {refused}");
    }
}
