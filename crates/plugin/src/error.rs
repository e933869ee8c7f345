//! [`PluginError`]: how a call to a plugin failed, always naming the
//! plugin, and what that means to drover's controller
//! ([`ProviderError`]: worth retrying, or not).

use crate::wire::{DROVER_0_1_0, INSTANCE_0_5_0, INSTANCE_0_6_1};
use drover_spi::ProviderError;

/// Why a plugin call failed; every variant names the plugin.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginError {
    /// Neither handshake answered as InfraKit's do.
    #[error("plugin {plugin} is not an InfraKit plugin ({hello}; {implements})")]
    NotAPlugin {
        /// The plugin's address.
        plugin: String,
        /// What Hello got.
        hello: String,
        /// What Implements got.
        implements: String,
    },
    /// It speaks another version of the instance interface, or none.
    #[error("plugin {plugin} implements {offered}, not {INSTANCE_0_6_1} or {INSTANCE_0_5_0}")]
    Version {
        /// The plugin's address.
        plugin: String,
        /// The interfaces it declared.
        offered: String,
    },
    /// The typed object is not behind the socket.
    #[error("plugin {plugin} has no instance object {kind:?} (it offers {offered})")]
    NoSuchType {
        /// The plugin's address.
        plugin: String,
        /// The type asked for.
        kind: String,
        /// The objects it offers.
        offered: String,
    },
    /// The socket could not be reached: nothing was sent.
    #[error("plugin {plugin}: {method} not sent: {detail}")]
    Unreachable {
        /// The plugin's address.
        plugin: String,
        /// The method.
        method: String,
        /// Why.
        detail: String,
    },
    /// Sent, no answer in time or the connection broke: maybe done.
    #[error("plugin {plugin}: {method} got no answer ({detail}); it may have been done")]
    Lost {
        /// The plugin's address.
        plugin: String,
        /// The method.
        method: String,
        /// Why.
        detail: String,
    },
    /// The plugin answered with an error.
    #[error("plugin {plugin}: {method} failed: {message}")]
    Refused {
        /// The plugin's address.
        plugin: String,
        /// The method.
        method: String,
        /// The plugin's message (and code).
        message: String,
    },
    /// The answer is not what the protocol says.
    #[error("plugin {plugin}: {method} answered malformed: {detail}")]
    Malformed {
        /// The plugin's address.
        plugin: String,
        /// The method.
        method: String,
        /// What was wrong.
        detail: String,
    },
    /// A Provision still runs from an earlier call for the same link.
    #[error(
        "plugin {plugin}: a Provision for link {link} got no answer and may still be running; not provisioning it again"
    )]
    InFlight {
        /// The plugin's address.
        plugin: String,
        /// The operation's link.
        link: String,
    },
    /// The machine needs boot secrets and the plugin does not take them.
    #[error(
        "plugin {plugin} does not declare {DROVER_0_1_0}, so it cannot be given this machine's boot secrets ({names}); drover never puts them in Spec.Init, tags or properties"
    )]
    NoSecretChannel {
        /// The plugin's address.
        plugin: String,
        /// The secret variables' names.
        names: String,
    },
    /// The request cannot be sent as asked (no link tag, a template that
    /// does not render).
    #[error("plugin {plugin}: {detail}")]
    BadRequest {
        /// The plugin's address.
        plugin: String,
        /// What is wrong.
        detail: String,
    },
    /// Nothing was done: the caller's fence refused.
    #[error("plugin {plugin}: not sent: {source}")]
    Fenced {
        /// The plugin's address.
        plugin: String,
        /// The fence's refusal.
        source: drover_spi::LeaseExpired,
    },
}

impl PluginError {
    /// What happened to the call, without the plugin's name (for a message
    /// that already names it).
    pub(crate) fn call_detail(&self) -> String {
        match self {
            PluginError::Unreachable { method, detail, .. } => {
                format!("{method} not sent: {detail}")
            }
            PluginError::Lost { method, detail, .. } => format!("{method} got no answer: {detail}"),
            PluginError::Refused {
                method, message, ..
            } => format!("{method} failed: {message}"),
            PluginError::Malformed { method, detail, .. } => {
                format!("{method} answered malformed: {detail}")
            }
            other => other.to_string(),
        }
    }
}

impl From<PluginError> for ProviderError {
    fn from(e: PluginError) -> Self {
        match e {
            PluginError::Fenced { source, .. } => ProviderError::Fenced(source),
            PluginError::Unreachable { .. }
            | PluginError::Lost { .. }
            | PluginError::Refused { .. }
            | PluginError::InFlight { .. } => ProviderError::Transient(e.to_string()),
            PluginError::NotAPlugin { .. }
            | PluginError::Version { .. }
            | PluginError::NoSuchType { .. }
            | PluginError::Malformed { .. }
            | PluginError::NoSecretChannel { .. }
            | PluginError::BadRequest { .. } => ProviderError::Permanent(e.to_string()),
        }
    }
}
