//! Reads a markdown file for what the docs test must do: the ```` ```console ````
//! transcripts to run, the files and stores they need, and the transcripts
//! marked as not executed. The convention is described in docs/testing.md
//! ("Docs that are executed").

/// Something a doc asks of the test, in document order.
#[derive(Debug, PartialEq)]
pub enum Item {
    /// `<!-- docs-test: file PATH -->` before a fence: the fence's text is
    /// written to PATH (as the reader would save it) before what follows runs.
    File { path: String, text: String },
    /// `<!-- docs-test: seed STORE FILE -->`: the store holds the cluster file
    /// as its converged revision 1. No command commits without an engine on
    /// an empty store, so the examples of the revision commands need this.
    Seed { store: String, file: String },
    /// A ```` ```console ```` fence: commands with the output the doc shows.
    Console(Vec<Step>),
}

/// One `$ command` of a transcript and the lines printed after it.
#[derive(Debug, PartialEq)]
pub struct Step {
    /// 1-based line of the command in the markdown file.
    pub line: usize,
    pub command: String,
    pub expected: Vec<String>,
}

/// What a directive says about the fence after it.
enum Pending {
    File(String),
    NotExecuted,
}

const DIRECTIVE: &str = "<!-- docs-test:";

/// The items of `text`, each with its 1-based line. A transcript (`$ ` lines)
/// in a fence that is neither ```` ```console ```` nor marked
/// `<!-- docs-test: not executed: WHY -->` is an error: every example is
/// either checked or says why it cannot be.
pub fn parse(text: &str) -> Result<Vec<(usize, Item)>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut items = Vec::new();
    let mut pending: Option<(usize, Pending)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let at = i + 1;
        i += 1;
        if let Some(body) = line.strip_prefix(DIRECTIVE) {
            let body = body
                .strip_suffix("-->")
                .ok_or_else(|| format!("line {at}: a directive ends on its own line with -->"))?
                .trim();
            if let Some(p) = &pending {
                return Err(format!("line {}: directive not followed by a fence", p.0));
            }
            match directive(body, at)? {
                Directive::Item(item) => items.push((at, item)),
                Directive::Pending(p) => pending = Some((at, p)),
            }
            continue;
        }
        let Some(info) = line.strip_prefix("```") else {
            if let (Some(p), false) = (&pending, line.is_empty()) {
                return Err(format!("line {}: directive not followed by a fence", p.0));
            }
            continue;
        };
        let start = i;
        while i < lines.len() && lines[i].trim() != "```" {
            i += 1;
        }
        let body = &lines[start..i.min(lines.len())];
        i += 1;
        match pending.take().map(|p| p.1) {
            Some(Pending::File(path)) => items.push((
                at,
                Item::File {
                    path,
                    text: body.iter().map(|l| format!("{l}\n")).collect(),
                },
            )),
            Some(Pending::NotExecuted) => {}
            None if info.trim() == "console" => {
                items.push((at, Item::Console(steps(body, start + 1)?)));
            }
            None if body.iter().any(|l| l.starts_with("$ ")) => {
                return Err(format!(
                    "line {at}: a transcript (`$ ` lines) in a ```{info} fence: make it ```console to have it checked, or mark it {DIRECTIVE} not executed: WHY -->"
                ));
            }
            None => {}
        }
    }
    match pending {
        Some((at, _)) => Err(format!("line {at}: directive not followed by a fence")),
        None => Ok(items),
    }
}

enum Directive {
    Item(Item),
    Pending(Pending),
}

fn directive(body: &str, at: usize) -> Result<Directive, String> {
    let words: Vec<&str> = body.split_whitespace().collect();
    match words.as_slice() {
        ["file", path] => Ok(Directive::Pending(Pending::File(path.to_string()))),
        ["seed", store, file] => Ok(Directive::Item(Item::Seed {
            store: store.to_string(),
            file: file.to_string(),
        })),
        ["not", "executed:", why @ ..] if !why.is_empty() => {
            Ok(Directive::Pending(Pending::NotExecuted))
        }
        _ => Err(format!(
            "line {at}: unknown directive {body:?}: file PATH, seed STORE FILE, or not executed: WHY"
        )),
    }
}

/// Splits a console fence into commands and their output; a command ending
/// in `\` continues on the next line, as in a shell.
fn steps(body: &[&str], first_line: usize) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut continued = false;
    for (n, line) in body.iter().enumerate() {
        if continued {
            let step = steps.last_mut().expect("a command continues");
            continued = push_command(&mut step.command, line.trim());
        } else if let Some(command) = line.strip_prefix("$ ") {
            let mut step = Step {
                line: first_line + n,
                command: String::new(),
                expected: Vec::new(),
            };
            continued = push_command(&mut step.command, command);
            steps.push(step);
        } else if let Some(step) = steps.last_mut() {
            step.expected.push(line.to_string());
        } else {
            return Err(format!(
                "line {}: a console fence starts with a `$ ` command",
                first_line + n
            ));
        }
    }
    Ok(steps)
}

/// Appends one line of a command; true when it ends in `\` (continued).
fn push_command(command: &mut String, part: &str) -> bool {
    match part.strip_suffix('\\') {
        Some(head) => {
            command.push_str(head.trim_end());
            command.push(' ');
            true
        }
        None => {
            command.push_str(part);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_fences_files_and_seeds_are_read_in_order() {
        let doc = "<!-- docs-test: file a.yaml -->\n```yaml\nx: 1\n```\n\n<!-- docs-test: seed file:///tmp/s.db a.yaml -->\n```console\n$ drover x \\\n    --y\nout\n...\n$ echo $?\n0\n```\n";
        let items = parse(doc).unwrap();
        assert_eq!(
            items[0],
            (
                2,
                Item::File {
                    path: "a.yaml".into(),
                    text: "x: 1\n".into()
                }
            )
        );
        assert!(matches!(&items[1], (6, Item::Seed { store, .. }) if store == "file:///tmp/s.db"));
        let (7, Item::Console(steps)) = &items[2] else {
            panic!("{items:?}")
        };
        assert_eq!(steps[0].command, "drover x --y");
        assert_eq!(steps[0].expected, ["out", "..."]);
        assert_eq!(
            (steps[1].line, steps[1].expected.as_slice()),
            (12, &["0".to_string()][..])
        );
    }

    #[test]
    fn an_unmarked_transcript_is_refused_and_a_marked_one_skipped() {
        let unmarked = "```\n$ drover status\nok\n```\n";
        assert!(parse(unmarked).unwrap_err().contains("```console"));
        let marked = format!("{DIRECTIVE} not executed: needs a swarm -->\n{unmarked}");
        assert_eq!(parse(&marked).unwrap(), []);
        let dangling = format!("{DIRECTIVE} not executed: needs a swarm -->\ntext\n");
        assert!(parse(&dangling).is_err());
    }
}
