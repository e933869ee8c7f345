//! `flavor.drover` of a manager group ([`crate::spec::DroverRelease`]).

use super::{Decoder, join};
use crate::spec::{DroverRelease, Role};
use crate::yaml::Node;

/// The fields of `flavor.drover`.
pub(super) const RELEASE_FIELDS: &[&str] = &["url", "sha256"];

impl Decoder<'_> {
    /// `flavor.drover`: a URL the boot script can fetch (it goes into the
    /// script between single quotes) and a SHA-256 to check it against.
    pub(super) fn release(
        &mut self,
        node: Option<&Node>,
        path: &str,
        role: Option<Role>,
    ) -> Option<Option<DroverRelease>> {
        let Some(node) = node else {
            return Some(None);
        };
        if let Some(role) = role.filter(|r| *r != Role::Manager) {
            self.error(
                node.pos(),
                path,
                format!(
                    "only managers run drover's controller, and this group's role is {}: remove flavor.drover",
                    role.as_str()
                ),
            );
            return None;
        }
        let f = self.fields(node, path, RELEASE_FIELDS)?;
        let url = self
            .required(
                &f,
                "url",
                path,
                "the URL the boot script fetches drover from",
            )
            .and_then(|n| self.release_url(n, &join(path, "url")));
        let sha256 = self
            .required(
                &f,
                "sha256",
                path,
                "the binary's SHA-256 (`sha256sum drover`), checked before it is installed",
            )
            .and_then(|n| self.sha256(n, &join(path, "sha256")));
        Some(Some(DroverRelease {
            url: url?,
            sha256: sha256?,
        }))
    }

    fn release_url(&mut self, node: &Node, path: &str) -> Option<String> {
        let url = self.http_url(
            node,
            path,
            "serve the release where the machines may fetch it without one",
        )?;
        if url
            .chars()
            .any(|c| c == '\'' || c.is_whitespace() || c.is_control())
        {
            self.error(
                node.pos(),
                path,
                "holds a quote, a space or a control character: percent-encode it (%27, %20)",
            );
            return None;
        }
        Some(url)
    }

    fn sha256(&mut self, node: &Node, path: &str) -> Option<String> {
        let hex = self.string(node, path)?;
        let ok = hex.len() == 64
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if !ok {
            self.error(
                node.pos(),
                path,
                format!("`{hex}` is not 64 lowercase hex digits: give the SHA-256 as `sha256sum drover` prints it"),
            );
            return None;
        }
        Some(hex)
    }
}
