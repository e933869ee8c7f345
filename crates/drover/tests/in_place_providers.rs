//! Which providers update in place is said twice: by the core's pure
//! validation (`drover_core::spec::IN_PLACE_PROVIDERS`, which cannot ask a
//! provider) and by each provider (`InstanceProvider::updates_in_place`).
//! Here the two are tied, for every provider drover ships
//! (`drover_core::spec::PROVIDERS`), each made as the binary makes it but
//! reaching nothing: a spec validation accepts is one its provider can
//! run, and one it refuses is one its provider could not.

use drover_core::spec::{
    EC2_PROVIDER, IN_PLACE_PROVIDERS, INCUS_PROVIDER, LOCAL_PROVIDER, PLUGIN_PROVIDER, PROVIDERS,
    PluginAddress, SIM_PROVIDER, SSH_PROVIDER,
};
use drover_spi::InstanceProvider;
use std::path::Path;
use std::sync::Arc;

/// Provider `name`, made over `dir` (nothing is reached: constructors only).
fn made(name: &str, dir: &Path) -> Arc<dyn InstanceProvider> {
    match name {
        LOCAL_PROVIDER => Arc::new(
            drover_local::LocalProvider::new(dir.join("local"), []).expect("a local provider"),
        ),
        INCUS_PROVIDER => Arc::new(drover_incus::IncusProvider::new(
            &dir.join("incus.sock"),
            "default",
            &dir.join("incus-engines"),
        )),
        EC2_PROVIDER => Arc::new(drover_ec2::Ec2Provider::new(drover_ec2::Settings::new(
            "us-east-1",
            Some("http://127.0.0.1:9"),
        ))),
        SSH_PROVIDER => Arc::new(
            drover_ssh::SshProvider::open(
                &dir.join("ssh"),
                Arc::new(drover_ssh::Declared {
                    current: Vec::new(),
                    earlier: Vec::new(),
                }),
            )
            .expect("an ssh provider"),
        ),
        SIM_PROVIDER => Arc::new(drover_sim::SimCloud::new(drover_sim::World::new(
            1,
            drover_sim::Timings::default(),
        ))),
        PLUGIN_PROVIDER => Arc::new(drover_plugin::PluginProvider::new(
            PluginAddress::parse("vsphere").expect("a plugin address"),
            &dir.join("plugin.sock"),
            drover_plugin::Timeouts::default(),
        )),
        other => panic!(
            "provider `{other}` is in drover_core::spec::PROVIDERS: make it here, so its updates_in_place is tied to IN_PLACE_PROVIDERS"
        ),
    }
}

#[tokio::test]
async fn updates_in_place_is_true_exactly_for_the_providers_validation_accepts_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for name in PROVIDERS {
        let provider = made(name, dir.path());
        let validation = IN_PLACE_PROVIDERS.contains(name);
        if provider.updates_in_place() != validation {
            wrong.push(format!(
                "{name}: updates_in_place() is {}, IN_PLACE_PROVIDERS {}",
                provider.updates_in_place(),
                if validation {
                    "names it"
                } else {
                    "does not name it"
                }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Every name validation accepts in place is a provider drover ships.
    for name in IN_PLACE_PROVIDERS {
        assert!(PROVIDERS.contains(name), "{name}");
    }
}
