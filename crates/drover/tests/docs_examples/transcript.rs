//! Compares what a doc shows with what a command printed. The doc's text is a
//! pattern: a line `...` stands for any number of lines (an excerpt), `[..]`
//! within a line for any text (a time or age that changes from run to run).
//! Runs of 12 or more hex digits — config hashes, operation links, cluster
//! ids — compare equal to each other on both sides, so a doc does not go
//! stale each time a default boot script (and with it every hash) changes.

/// Whether `actual` is what the `expected` lines of a doc describe.
pub fn matches(expected: &[String], actual: &[String]) -> bool {
    let expected: Vec<String> = expected.iter().map(|l| normalise(l)).collect();
    let actual: Vec<String> = actual.iter().map(|l| normalise(l)).collect();
    // fits[i][j]: expected[i..] describes actual[j..].
    let (n, m) = (expected.len(), actual.len());
    let mut fits = vec![vec![false; m + 1]; n + 1];
    fits[n][m] = true;
    for i in (0..n).rev() {
        for j in (0..=m).rev() {
            fits[i][j] = if expected[i] == "..." {
                fits[i + 1][j] || (j < m && fits[i][j + 1])
            } else {
                j < m && line_matches(&expected[i], &actual[j]) && fits[i + 1][j + 1]
            };
        }
    }
    fits[0][0]
}

/// Trailing blanks dropped, long hex runs replaced by `<hex>`.
fn normalise(line: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    for c in line.trim_end().chars().chain(std::iter::once(' ')) {
        if c.is_ascii_hexdigit() && !c.is_ascii_uppercase() {
            run.push(c);
            continue;
        }
        if run.len() >= 12 {
            out.push_str("<hex>");
        } else {
            out.push_str(&run);
        }
        run.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// `[..]` in `pattern` matches any text; the rest must be equal.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return pattern == line;
    }
    let fits = line.len() >= first.len() + last.len();
    if !(fits && line.starts_with(first) && line.ends_with(last)) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    #[test]
    fn a_changed_line_is_drift() {
        let out = lines("20 steps; minimum manager fault tolerance during the change: 0");
        assert!(matches(&out, &out));
        let doc = lines("20 steps; minimum manager fault tolerance during the change: 1");
        assert!(!matches(&doc, &out));
        assert!(!matches(&lines("a\nb"), &lines("a")), "a missing line");
        assert!(!matches(&lines("a"), &lines("a\nb")), "an extra line");
    }

    #[test]
    fn an_elision_stands_for_any_number_of_lines_in_order() {
        let out = lines("head\none\ntwo\nConverged");
        assert!(matches(&lines("head\n...\nConverged"), &out));
        assert!(matches(
            &lines("...\nhead\n...\ntwo\n...\nConverged\n..."),
            &out
        ));
        assert!(!matches(&lines("head\n...\ntwo\n...\none"), &out), "order");
    }

    #[test]
    fn a_wildcard_stands_for_text_within_a_line() {
        let out = lines("2     no       ada@ops1   3s      label v2");
        assert!(matches(
            &lines("2     no       ada@ops1   [..]label v2"),
            &out
        ));
        assert!(!matches(
            &lines("2     yes      ada@ops1   [..]label v2"),
            &out
        ));
        assert!(
            !matches(&lines("2[..]v2[..]v2"), &lines("2 v2")),
            "no overlap"
        );
    }

    #[test]
    fn hashes_compare_equal_but_short_numbers_do_not() {
        let doc = lines("provision (link managers-1f8410633ef306ac-1) i-0003");
        assert!(matches(
            &doc,
            &lines("provision (link managers-0ce00ec29e11805a-1) i-0003")
        ));
        assert!(!matches(
            &doc,
            &lines("provision (link managers-1f8410633ef306ac-1) i-0004")
        ));
    }
}
