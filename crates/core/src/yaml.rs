//! A YAML (and therefore JSON) document as a tree whose every node remembers
//! where it came from, so validation can report `FILE:LINE:COL` for each
//! problem and report all of them at once.
//!
//! serde stops at the first error and forgets positions; the spec decoder
//! instead walks this tree, so it can keep going and point at every mistake.

use saphyr_parser::{Event, Parser, ScalarStyle};
use std::collections::HashMap;

/// 1-based line and column of a node in the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    /// Line, counted from 1.
    pub line: usize,
    /// Column, counted from 1.
    pub col: usize,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One node of the document.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A scalar, kept as text; `quoted` tells `"3"` from `3`.
    Scalar {
        /// The scalar's text.
        value: String,
        /// True when the scalar was quoted or a block scalar (so it is a string).
        quoted: bool,
        /// True for a literal block scalar (`|`): its lines are the file's
        /// lines from `pos` on, at `pos`'s column, so a position inside its
        /// text (a boot script's) maps to the file ([`Node::inner_pos`]).
        literal: bool,
        /// Where it starts.
        pos: Pos,
    },
    /// A sequence.
    Seq {
        /// The items in order.
        items: Vec<Node>,
        /// Where it starts.
        pos: Pos,
    },
    /// A mapping whose keys are scalars, in document order.
    Map {
        /// `(key, key position, value)` in document order.
        entries: Vec<(String, Pos, Node)>,
        /// Where it starts.
        pos: Pos,
    },
}

impl Node {
    /// Where this node starts.
    pub fn pos(&self) -> Pos {
        match self {
            Node::Scalar { pos, .. } | Node::Seq { pos, .. } | Node::Map { pos, .. } => *pos,
        }
    }

    /// Where line `line`, column `col` (1-based) of a literal block
    /// scalar's text is in the file; `None` for any other node, whose text
    /// does not keep the file's layout.
    pub fn inner_pos(&self, line: usize, col: usize) -> Option<Pos> {
        match self {
            Node::Scalar {
                literal: true, pos, ..
            } if line >= 1 && col >= 1 => Some(Pos {
                line: pos.line + line - 1,
                col: pos.col + col - 1,
            }),
            _ => None,
        }
    }

    /// True for a plain `null`, `~` or empty scalar.
    pub fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { value, quoted: false, .. } if value.is_empty() || value == "~" || value == "null")
    }

    /// A short name of the node's kind, for "expected X, found Y" messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Scalar { .. } if self.is_null() => "null",
            Node::Scalar { .. } => "a scalar",
            Node::Seq { .. } => "a list",
            Node::Map { .. } => "a mapping",
        }
    }

    /// The node as a JSON value (plain scalars typed as YAML 1.2 core schema would).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Node::Scalar { value, quoted, .. } => {
                if *quoted {
                    return Value::String(value.clone());
                }
                if self.is_null() {
                    return Value::Null;
                }
                match value.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    _ => {
                        if let Ok(i) = value.parse::<i64>() {
                            Value::from(i)
                        } else if let Some(f) = value.parse::<f64>().ok().filter(|f| f.is_finite())
                        {
                            Value::from(f)
                        } else {
                            Value::String(value.clone())
                        }
                    }
                }
            }
            Node::Seq { items, .. } => Value::Array(items.iter().map(Node::to_json).collect()),
            Node::Map { entries, .. } => Value::Object(
                entries
                    .iter()
                    .map(|(k, _, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

/// A syntax error in the document.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    /// Where the parser stopped.
    pub pos: Pos,
    /// What it found.
    pub message: String,
}

fn pos_of(m: &saphyr_parser::Marker) -> Pos {
    Pos {
        line: m.line(),
        col: m.col() + 1,
    }
}

/// The largest file read, in bytes: a cluster file of a thousand groups is
/// a few hundred kilobytes.
pub const MAX_BYTES: usize = 1 << 20;
/// The deepest nesting of lists and mappings: a cluster file nests about
/// six levels deep.
pub const MAX_DEPTH: usize = 64;
/// The most nodes a document may hold once its aliases are expanded: a
/// few hundred bytes of nested aliases can otherwise expand to billions.
pub const MAX_NODES: usize = 250_000;

/// Parses the one document of `text` into a positioned tree.
///
/// Duplicate keys in one mapping are a syntax error: YAML forbids them and a
/// silently shadowed key is exactly the kind of typo validation must catch.
/// A second document is an error too (it would be ignored). An empty
/// document yields a null scalar. Size, nesting depth and alias expansion
/// are bounded ([`MAX_BYTES`], [`MAX_DEPTH`], [`MAX_NODES`]), so no input
/// makes the parser use unbounded memory or time.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let start = Pos { line: 1, col: 1 };
    if text.len() > MAX_BYTES {
        return Err(SyntaxError {
            pos: start,
            message: format!(
                "the file is {} bytes, more than the {} KiB a cluster file may have",
                text.len(),
                MAX_BYTES / 1024
            ),
        });
    }
    let mut builder = Builder::default();
    let mut ended: Option<Node> = None;
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| {
            let pos = pos_of(e.marker());
            tab_indent_near(text, pos.line).unwrap_or(SyntaxError {
                pos,
                message: e.info().to_string(),
            })
        })?;
        let pos = pos_of(&span.start);
        if ended.is_some() && !matches!(event, Event::StreamEnd | Event::Nothing) {
            return Err(SyntaxError {
                pos,
                message: "a second document starts here: a cluster file holds exactly one (remove the `---` and what follows, or split the file)".into(),
            });
        }
        match event {
            Event::StreamStart | Event::DocumentStart(_) | Event::Nothing => {}
            Event::DocumentEnd => ended = builder.root.take().or(Some(null_at(start))),
            Event::StreamEnd => break,
            Event::Alias(id) => {
                let size = builder.anchors.get(&id).map(|(_, size)| *size);
                let size = size.ok_or(SyntaxError {
                    pos,
                    message: "alias refers to an unknown anchor".into(),
                })?;
                // Counted before the copy: an expansion past the bound is
                // refused without being made.
                builder.grow(size, pos)?;
                let node = builder.anchors[&id].0.clone();
                builder.push_value(node, size)?;
            }
            Event::Scalar(value, style, anchor, _tag) => {
                builder.grow(1, pos)?;
                let node = Node::Scalar {
                    value: value.into_owned(),
                    quoted: !matches!(style, ScalarStyle::Plain),
                    literal: matches!(style, ScalarStyle::Literal),
                    pos,
                };
                builder.anchor(anchor, &node, 1);
                builder.push_value(node, 1)?;
            }
            Event::SequenceStart(anchor, _) => builder.open(
                Node::Seq {
                    items: Vec::new(),
                    pos,
                },
                anchor,
            )?,
            Event::MappingStart(anchor, _) => builder.open(
                Node::Map {
                    entries: Vec::new(),
                    pos,
                },
                anchor,
            )?,
            Event::SequenceEnd | Event::MappingEnd => {
                let open = builder.stack.pop().ok_or(SyntaxError {
                    pos,
                    message: "unbalanced collection end".into(),
                })?;
                builder.anchor(open.anchor, &open.node, open.size);
                builder.push_value(open.node, open.size)?;
            }
        }
    }
    Ok(ended.or(builder.root).unwrap_or_else(|| null_at(start)))
}

/// A tab in the indentation of line `line` or the next: the parser trips
/// over it at the end of the line before, naming neither the tab's line nor
/// the fix.
fn tab_indent_near(text: &str, line: usize) -> Option<SyntaxError> {
    text.lines()
        .enumerate()
        .skip(line.saturating_sub(1))
        .take(2)
        .find_map(|(i, l)| {
            let indent = &l[..l.len() - l.trim_start_matches([' ', '\t']).len()];
            indent.find('\t').map(|col| SyntaxError {
                pos: Pos {
                    line: i + 1,
                    col: col + 1,
                },
                message: "a tab indents this line; YAML indents with spaces only (replace the tab with spaces)".into(),
            })
        })
}

/// An empty (null) scalar at `pos`.
fn null_at(pos: Pos) -> Node {
    Node::Scalar {
        value: String::new(),
        quoted: false,
        literal: false,
        pos,
    }
}

struct Open {
    node: Node,
    anchor: usize,
    pending_key: Option<(String, Pos)>,
    /// Nodes in this collection so far, itself included.
    size: usize,
}

#[derive(Default)]
struct Builder {
    stack: Vec<Open>,
    /// Each anchor's node and how many nodes it holds.
    anchors: HashMap<usize, (Node, usize)>,
    root: Option<Node>,
    /// Nodes in the document so far, aliases expanded.
    nodes: usize,
}

impl Builder {
    fn anchor(&mut self, id: usize, node: &Node, size: usize) {
        if id != 0 {
            self.anchors.insert(id, (node.clone(), size));
        }
    }

    /// Counts `size` more nodes at `pos`, refusing past [`MAX_NODES`].
    fn grow(&mut self, size: usize, pos: Pos) -> Result<(), SyntaxError> {
        self.nodes = self.nodes.saturating_add(size);
        if self.nodes > MAX_NODES {
            return Err(SyntaxError {
                pos,
                message: format!(
                    "the document expands to more than {MAX_NODES} nodes (aliases included): use fewer or smaller aliases"
                ),
            });
        }
        Ok(())
    }

    /// Opens a list or mapping at `node`'s position, refusing past [`MAX_DEPTH`].
    fn open(&mut self, node: Node, anchor: usize) -> Result<(), SyntaxError> {
        let pos = node.pos();
        if self.stack.len() >= MAX_DEPTH {
            return Err(SyntaxError {
                pos,
                message: format!("lists and mappings nest deeper than {MAX_DEPTH} levels here"),
            });
        }
        self.grow(1, pos)?;
        self.stack.push(Open {
            node,
            anchor,
            pending_key: None,
            size: 1,
        });
        Ok(())
    }

    fn push_value(&mut self, node: Node, size: usize) -> Result<(), SyntaxError> {
        let Some(top) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        top.size = top.size.saturating_add(size);
        match &mut top.node {
            Node::Seq { items, .. } => items.push(node),
            Node::Map { entries, .. } => match top.pending_key.take() {
                None => match node {
                    Node::Scalar { value, pos, .. } => {
                        if entries.iter().any(|(k, _, _)| *k == value) {
                            return Err(SyntaxError {
                                pos,
                                message: format!("duplicate key `{value}` in one mapping"),
                            });
                        }
                        top.pending_key = Some((value, pos));
                    }
                    other => {
                        return Err(SyntaxError {
                            pos: other.pos(),
                            message: "mapping keys must be scalars".into(),
                        });
                    }
                },
                Some((key, kpos)) => entries.push((key, kpos, node)),
            },
            Node::Scalar { .. } => unreachable!("scalars are never open"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_point_at_values() {
        let doc = parse("a:\n  b: 3\n").unwrap();
        let Node::Map { entries, .. } = doc else {
            panic!()
        };
        let Node::Map { entries: inner, .. } = &entries[0].2 else {
            panic!()
        };
        assert_eq!(inner[0].1, Pos { line: 2, col: 3 });
        assert_eq!(inner[0].2.pos(), Pos { line: 2, col: 6 });
    }

    #[test]
    fn json_parses_to_the_same_tree_values_as_yaml() {
        let y = parse("x: [1, \"2\", true]\n").unwrap().to_json();
        let j = parse("{\"x\": [1, \"2\", true]}").unwrap().to_json();
        assert_eq!(y, j);
    }

    #[test]
    fn duplicate_keys_are_rejected_with_their_position() {
        let e = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(e.pos.line, 2);
        assert!(e.message.contains("duplicate key `a`"));
    }

    /// "Billion laughs": nine levels of ten aliases each would expand a
    /// few hundred bytes to a billion nodes.
    #[test]
    fn alias_expansion_nesting_size_and_documents_are_bounded() {
        let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let p = i - 1;
            doc += &format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            );
        }
        let e = parse(&doc).unwrap_err();
        assert!(e.message.contains("more than 250000 nodes"), "{e:?}");
        assert_eq!(e.pos.line, 6);

        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let e = parse(&deep).unwrap_err();
        assert!(e.message.contains("deeper than 64 levels"), "{e:?}");
        assert_eq!(e.pos, Pos { line: 1, col: 65 });

        let big = format!("a: \"{}\"\n", "x".repeat(MAX_BYTES));
        assert!(parse(&big).unwrap_err().message.contains("1024 KiB"));

        let e = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(e.message.contains("a second document"), "{e:?}");
        assert_eq!(e.pos.line, 2);
        assert!(parse("---\na: 1\n...\n").is_ok());
    }

    #[test]
    fn a_tab_in_the_indentation_is_named_on_its_own_line() {
        for (text, line) in [("a:\n  b: 1\n\tc: 2\n", 3), ("a:\n\tb: 1\n", 2)] {
            let e = parse(text).unwrap_err();
            assert!(e.message.contains("indents with spaces only"), "{e:?}");
            assert_eq!(e.pos, Pos { line, col: 1 });
        }
    }

    #[test]
    fn aliases_resolve_to_their_anchor() {
        let doc = parse("a: &x {k: v}\nb: *x\n").unwrap().to_json();
        assert_eq!(doc["a"], doc["b"]);
    }
}
