//! Secrets refused at the door: every key and scalar of the file, whatever
//! field it is (a boot script, a label, a property, a hook's argument), is
//! checked with [`secret_value`]'s one rule. A spec is stored, hashed,
//! shown and sent to providers, so no field may hold a secret; walking the
//! whole tree means a field added later is covered without being listed.

use super::{Decoder, Severity, join};
use crate::spec::secret_value::{self, Found};
use crate::yaml::{Node, Pos};

impl Decoder<'_> {
    /// Reports each secret under `node` (at `path`), once per field: a
    /// field already refused for a secret by its own rule (a hook's URL) is
    /// not reported again.
    pub(super) fn secrets(&mut self, node: &Node, path: &str) {
        match node {
            Node::Map { entries, .. } => {
                for (key, kpos, value) in entries {
                    let at = join(path, key);
                    if let Some(found) = secret_value::in_text(key) {
                        self.secret(*kpos, &at, "its name holds", found);
                    }
                    match value {
                        Node::Scalar { value: text, .. } if !value.is_null() => {
                            if let Some(found) = secret_value::in_field(key, text) {
                                let pos = inner(value, text, found.offset);
                                self.secret(pos, &at, "holds", found);
                            }
                        }
                        _ => self.secrets(value, &at),
                    }
                }
            }
            Node::Seq { items, .. } => {
                for (i, item) in items.iter().enumerate() {
                    self.secrets(item, &format!("{path}[{i}]"));
                }
            }
            Node::Scalar { value: text, .. } => {
                if let Some(found) = secret_value::in_text(text) {
                    let at = if path.is_empty() { "(document)" } else { path };
                    self.secret(inner(node, text, found.offset), at, "holds", found);
                }
            }
        }
    }

    fn secret(&mut self, pos: Pos, path: &str, verb: &str, found: Found) {
        let already = self
            .diags
            .iter()
            .any(|d| d.path == path && d.severity == Severity::Error);
        if !already {
            let s = found.secret;
            self.error(
                pos,
                path,
                format!(
                    "{verb} {}, which a spec never may (it is stored, hashed, shown by plan, status, diff and export, and sent to providers); {}",
                    s.what(),
                    s.belongs()
                ),
            );
        }
    }
}

/// Where byte `offset` of a scalar's `text` is in the file: exact inside a
/// literal block (a boot script), else the scalar itself.
fn inner(node: &Node, text: &str, offset: usize) -> Pos {
    let before = &text[..offset.min(text.len())];
    let line = 1 + before.matches('\n').count();
    let col = 1 + before.rsplit('\n').next().unwrap_or("").chars().count();
    node.inner_pos(line, col).unwrap_or(node.pos())
}
