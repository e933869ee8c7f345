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

/// Parses the first document of `text` into a positioned tree.
///
/// Duplicate keys in one mapping are a syntax error: YAML forbids them and a
/// silently shadowed key is exactly the kind of typo validation must catch.
/// An empty document yields a null scalar.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut builder = Builder::default();
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| SyntaxError {
            pos: pos_of(e.marker()),
            message: e.info().to_string(),
        })?;
        let pos = pos_of(&span.start);
        match event {
            Event::StreamStart | Event::DocumentStart(_) | Event::Nothing => {}
            Event::DocumentEnd | Event::StreamEnd => {
                if let Some(root) = builder.root.take() {
                    return Ok(root);
                }
                if matches!(event, Event::StreamEnd) {
                    break;
                }
            }
            Event::Alias(id) => {
                let node = builder.anchors.get(&id).cloned().ok_or(SyntaxError {
                    pos,
                    message: "alias refers to an unknown anchor".into(),
                })?;
                builder.push_value(node)?;
            }
            Event::Scalar(value, style, anchor, _tag) => {
                let node = Node::Scalar {
                    value: value.into_owned(),
                    quoted: !matches!(style, ScalarStyle::Plain),
                    pos,
                };
                builder.anchor(anchor, &node);
                builder.push_value(node)?;
            }
            Event::SequenceStart(anchor, _) => builder.stack.push(Open {
                node: Node::Seq {
                    items: Vec::new(),
                    pos,
                },
                anchor,
                pending_key: None,
            }),
            Event::MappingStart(anchor, _) => builder.stack.push(Open {
                node: Node::Map {
                    entries: Vec::new(),
                    pos,
                },
                anchor,
                pending_key: None,
            }),
            Event::SequenceEnd | Event::MappingEnd => {
                let open = builder.stack.pop().ok_or(SyntaxError {
                    pos,
                    message: "unbalanced collection end".into(),
                })?;
                builder.anchor(open.anchor, &open.node);
                builder.push_value(open.node)?;
            }
        }
    }
    Ok(builder.root.unwrap_or(Node::Scalar {
        value: String::new(),
        quoted: false,
        pos: Pos { line: 1, col: 1 },
    }))
}

struct Open {
    node: Node,
    anchor: usize,
    pending_key: Option<(String, Pos)>,
}

#[derive(Default)]
struct Builder {
    stack: Vec<Open>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
}

impl Builder {
    fn anchor(&mut self, id: usize, node: &Node) {
        if id != 0 {
            self.anchors.insert(id, node.clone());
        }
    }

    fn push_value(&mut self, node: Node) -> Result<(), SyntaxError> {
        let Some(top) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
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

    #[test]
    fn aliases_resolve_to_their_anchor() {
        let doc = parse("a: &x {k: v}\nb: *x\n").unwrap().to_json();
        assert_eq!(doc["a"], doc["b"]);
    }
}
