//! InfraKit instance plugins, both ways: the clients a controller wires
//! for `--plugin` (each a provider under `plugin:NAME[/TYPE]`, the key
//! groups' `provider_key` names), and the provider `drover plugin serve`
//! exposes.

use crate::cli::LocalArgs;
use crate::error::MainError;
use drover_controller::Providers;
use drover_core::spec::PluginAddress;
use drover_plugin::{PluginProvider, Timeouts, discovery, server};
use drover_spi::InstanceProvider;
use std::path::PathBuf;
use std::sync::Arc;

/// The plugin clients `--plugin` names, by provider key.
pub(super) fn plugins(args: &LocalArgs) -> Result<Providers, MainError> {
    if args.plugins.is_empty() {
        return Ok(Providers::new());
    }
    let dir = plugins_dir(args)?;
    args.plugins
        .iter()
        .map(|name| {
            let address = PluginAddress::parse(name)
                .map_err(|e| MainError::BadInput(format!("--plugin: {e}")))?;
            let key = format!("{}:{address}", drover_core::spec::PLUGIN_PROVIDER);
            let socket = discovery::socket(&dir, &address);
            let client = PluginProvider::new(address, &socket, Timeouts::default());
            Ok((key, Arc::new(client) as Arc<dyn InstanceProvider>))
        })
        .collect()
}

fn plugins_dir(args: &LocalArgs) -> Result<PathBuf, MainError> {
    args.plugins_dir
        .clone()
        .or_else(|| discovery::plugins_dir(|k| std::env::var(k).ok()))
        .ok_or_else(|| {
            MainError::BadInput(
                "--plugins-dir: not given, and neither INFRAKIT_HOME nor HOME is set".into(),
            )
        })
}

/// The provider `drover plugin serve NAME` exposes.
pub fn served_provider(
    name: &str,
    args: &LocalArgs,
) -> Result<Arc<dyn InstanceProvider>, MainError> {
    let machines = super::machines(args)?;
    let missing = |flag: &str| MainError::BadInput(format!("serving {name} needs {flag}"));
    match name {
        drover_core::spec::LOCAL_PROVIDER => machines
            .local
            .map(|l| l as Arc<dyn InstanceProvider>)
            .ok_or_else(|| missing("--local-dir (DROVER_LOCAL_DIR)")),
        drover_core::spec::INCUS_PROVIDER => machines
            .incus
            .map(|i| i as Arc<dyn InstanceProvider>)
            .ok_or_else(|| missing("--incus-engines (DROVER_INCUS_ENGINES)")),
        drover_core::spec::EC2_PROVIDER => machines
            .ec2
            .map(|e| e as Arc<dyn InstanceProvider>)
            .ok_or_else(|| missing("--ec2 true and --ec2-region (DROVER_EC2, AWS_REGION)")),
        drover_core::spec::SIM_PROVIDER => Ok(Arc::new(drover_sim::SimCloud::new(
            drover_sim::World::new(1, drover_sim::Timings::default()),
        ))),
        other => Err(MainError::BadInput(format!(
            "{other} is not a provider drover can serve: local, incus, ec2 or sim"
        ))),
    }
}

/// Binds the plugin's socket; the guard removes it on exit.
pub fn bind_plugin_socket(
    socket: &std::path::Path,
) -> Result<(tokio::net::UnixListener, server::SocketGuard), MainError> {
    server::bind(socket).map_err(|e| MainError::BadInput(format!("--socket: {e}")))
}

pub use server::serve as serve_plugin;
