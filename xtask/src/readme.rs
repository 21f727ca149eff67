//! The generated sections of `docs/benchmarks.md`: a benchmark's table lives between the markers
//! `<!-- bench NAME: begin -->` and `<!-- bench NAME: end -->`, and `--readme` replaces what is
//! between them, leaving the text around them as the author wrote it.

use std::path::Path;

/// Where the benchmarks' tables live, from the workspace root.
pub(crate) const BENCHMARKS: &str = "docs/benchmarks.md";

/// Replaces the section `name` of the workspace's docs/benchmarks.md with `table`.
pub(crate) fn write_section(name: &str, table: &str) -> Result<(), String> {
    let path = crate::workspace_root().join(BENCHMARKS);
    replace_in_file(&path, name, table)?;
    println!("{BENCHMARKS} updated");
    Ok(())
}

/// The text of the section `name` of docs/benchmarks.md, between its markers.
pub(crate) fn section(name: &str) -> Result<String, String> {
    let path = crate::workspace_root().join(BENCHMARKS);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (begin, end) = (begin(name), end(name));
    let a = text.find(&begin).map(|a| a + begin.len() + 1);
    let b = a.and_then(|a| text[a..].find(&end).map(|b| a + b));
    match (a, b) {
        (Some(a), Some(b)) => Ok(text[a..b].to_string()),
        _ => Err(format!(
            "{} has no `{begin}` … `{end}` markers",
            path.display()
        )),
    }
}

fn replace_in_file(path: &Path, name: &str, table: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let new = replace(&text, name, table).ok_or_else(|| {
        format!(
            "{} has no `{}` … `{}` markers",
            path.display(),
            begin(name),
            end(name)
        )
    })?;
    std::fs::write(path, new).map_err(|e| format!("{}: {e}", path.display()))
}

fn begin(name: &str) -> String {
    format!("<!-- bench {name}: begin -->")
}

fn end(name: &str) -> String {
    format!("<!-- bench {name}: end -->")
}

/// `text` with the section `name` holding `table`; `None` when the markers are missing or out
/// of order.
fn replace(text: &str, name: &str, table: &str) -> Option<String> {
    let (begin, end) = (begin(name), end(name));
    let a = text.find(&begin)?;
    let b = a + text[a..].find(&end)?;
    let mut table = table.to_string();
    if !table.ends_with('\n') {
        table.push('\n');
    }
    Some(format!("{}{begin}\n{table}{}", &text[..a], &text[b..]))
}

#[cfg(test)]
mod tests {
    use super::replace;

    #[test]
    fn only_the_named_section_changes() {
        let text = "intro\n<!-- bench a: begin -->\nold a\n<!-- bench a: end -->\nmiddle\n\
                    <!-- bench b: begin -->\nold b\n<!-- bench b: end -->\nend\n";
        let new = replace(text, "b", "new b").unwrap();
        assert_eq!(
            new,
            "intro\n<!-- bench a: begin -->\nold a\n<!-- bench a: end -->\nmiddle\n\
             <!-- bench b: begin -->\nnew b\n<!-- bench b: end -->\nend\n"
        );
    }

    #[test]
    fn missing_or_reversed_markers_are_refused() {
        assert!(replace("no markers", "a", "t").is_none());
        let reversed = "<!-- bench a: end -->\n<!-- bench a: begin -->\n";
        assert!(replace(reversed, "a", "t").is_none());
    }
}
