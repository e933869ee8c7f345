//! The address of an instance plugin (`instance.plugin: NAME[/TYPE]`):
//! InfraKit's naming, where `NAME` is the file name of the plugin's socket
//! in the plugins directory and `TYPE` one of the typed objects behind it.
//! Parsing is pure, so the decoder refuses a bad name before any socket is
//! looked for.

/// The provider name a group uses for a machine plugin
/// (`instance.provider: plugin`).
pub const PLUGIN_PROVIDER: &str = "plugin";

/// The longest name or type: a socket file name, kept well below the unix
/// socket path limit (108 bytes) once joined to a plugins directory.
pub const MAX_PLUGIN_NAME: usize = 64;

/// A plugin's address: the socket's name and, optionally, the typed object
/// behind it (InfraKit's `name/type`; no type means the default object).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PluginAddress {
    /// The socket's file name in the plugins directory.
    pub name: String,
    /// The typed object, sent as every request's `Type` (`""` when `None`).
    pub kind: Option<String>,
}

/// Why a plugin address is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginAddressError {
    /// Nothing before or after the `/`.
    #[error("`{0}` has an empty part: expected NAME or NAME/TYPE")]
    Empty(String),
    /// More than one `/`.
    #[error("`{0}` has more than one `/`: expected NAME or NAME/TYPE")]
    TooDeep(String),
    /// A character a socket file name should not hold, or a leading `.`/`-`.
    #[error(
        "`{0}` is not a plugin name: letters, digits, `.`, `_` and `-` only, starting with a letter or digit, at most 64 characters"
    )]
    BadChars(String),
}

impl PluginAddress {
    /// Parses `NAME` or `NAME/TYPE`.
    pub fn parse(s: &str) -> Result<PluginAddress, PluginAddressError> {
        let mut parts = s.split('/');
        let name = parts.next().unwrap_or_default();
        let kind = parts.next();
        if parts.next().is_some() {
            return Err(PluginAddressError::TooDeep(s.into()));
        }
        if name.is_empty() || kind.is_some_and(str::is_empty) {
            return Err(PluginAddressError::Empty(s.into()));
        }
        for part in std::iter::once(name).chain(kind) {
            if !usable(part) {
                return Err(PluginAddressError::BadChars(s.into()));
            }
        }
        Ok(PluginAddress {
            name: name.into(),
            kind: kind.map(str::to_string),
        })
    }

    /// The request's `Type`: the typed object, or `""` for the default one.
    pub fn kind_or_default(&self) -> &str {
        self.kind.as_deref().unwrap_or("")
    }
}

impl std::fmt::Display for PluginAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Some(k) => write!(f, "{}/{k}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

fn usable(part: &str) -> bool {
    part.len() <= MAX_PLUGIN_NAME
        && part.starts_with(|c: char| c.is_ascii_alphanumeric())
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_typed_objects_parse() {
        let a = PluginAddress::parse("vsphere").unwrap();
        assert_eq!((a.name.as_str(), a.kind_or_default()), ("vsphere", ""));
        let a = PluginAddress::parse("tf/web-1.large").unwrap();
        assert_eq!(a.kind.as_deref(), Some("web-1.large"));
        assert_eq!(a.to_string(), "tf/web-1.large");
    }

    #[test]
    fn bad_names_are_refused_with_the_reason() {
        for (bad, want) in [
            ("", PluginAddressError::Empty("".into())),
            ("a/", PluginAddressError::Empty("a/".into())),
            ("a/b/c", PluginAddressError::TooDeep("a/b/c".into())),
            ("../x", PluginAddressError::BadChars("../x".into())),
            (".hidden", PluginAddressError::BadChars(".hidden".into())),
            ("a b", PluginAddressError::BadChars("a b".into())),
        ] {
            assert_eq!(PluginAddress::parse(bad), Err(want), "{bad:?}");
        }
        assert!(PluginAddress::parse(&"x".repeat(65)).is_err());
    }
}
