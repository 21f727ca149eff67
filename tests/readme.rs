//! The README's generated sections match what they are generated from — the list of the
//! pipeline's stages comes from the table of passes, the command-line reference from clap's help
//! of each command — and every kernel it shows parses.
//!
//! `POLYFUSE_UPDATE_README=1 cargo test --test readme` rewrites the generated sections in place.

use std::path::Path;
use std::process::Command;

const README: &str = include_str!("../README.md");

/// Where `<!-- NAME: begin -->\n` ends and `<!-- NAME: end -->` starts in `text`.
fn section(text: &str, name: &str) -> (usize, usize) {
    let begin = format!("<!-- {name}: begin -->\n");
    let end = format!("<!-- {name}: end -->");
    let a = text
        .find(&begin)
        .unwrap_or_else(|| panic!("README.md has no `{begin}` marker"))
        + begin.len();
    let b = text[a..]
        .find(&end)
        .unwrap_or_else(|| panic!("README.md has no `{end}` marker"));
    (a, a + b)
}

/// Checks (or, with `POLYFUSE_UPDATE_README`, rewrites) the section `name`.
fn check_section(name: &str, expected: &str) {
    let (a, b) = section(README, name);
    if README[a..b] == *expected {
        return;
    }
    if std::env::var_os("POLYFUSE_UPDATE_README").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
        let text = std::fs::read_to_string(&path).unwrap();
        let (a, b) = section(&text, name);
        let new = format!("{}{expected}{}", &text[..a], &text[b..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    panic!(
        "README.md's `{name}` section is out of date (POLYFUSE_UPDATE_README=1 cargo test \
         --test readme rewrites it); it should read:\n{expected}"
    );
}

#[test]
fn the_stage_list_is_the_table_of_passes() {
    check_section("stages", &polyhedral::passes::stage_list());
}

#[test]
fn the_command_line_reference_is_the_help_of_each_command() {
    let mut text = String::from("```text\n");
    for command in [&[][..], &["check"], &["compile"], &["run"], &["sim"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_polyfuse"))
            .args(command)
            .arg("-h")
            .output()
            .unwrap();
        assert!(out.status.success(), "polyfuse {command:?} -h failed");
        let words: Vec<&str> = std::iter::once("polyfuse")
            .chain(command.iter().copied())
            .collect();
        text.push_str(&format!("$ {} -h\n", words.join(" ")));
        text.push_str(&String::from_utf8(out.stdout).unwrap());
        text.push('\n');
    }
    text.truncate(text.trim_end().len());
    text.push_str("\n```\n");
    check_section("cli", &text);
}

/// The fenced code blocks of the README: (info string, body).
fn code_blocks() -> Vec<(&'static str, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(&str, String)> = None;
    for line in README.lines() {
        match (line.strip_prefix("```"), open.take()) {
            (Some(_), Some(block)) => blocks.push(block),
            (Some(info), None) => open = Some((info, String::new())),
            (None, Some((info, mut body))) => {
                body.push_str(line);
                body.push('\n');
                open = Some((info, body));
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "README.md has an unclosed code block");
    blocks
}

/// The `.pf` kernels of the README (its fenced blocks without a language that hold a
/// `kernel`) parse.
#[test]
fn the_kernels_of_the_readme_parse() {
    let kernels: Vec<String> = code_blocks()
        .into_iter()
        .filter(|(info, body)| info.is_empty() && body.lines().any(|l| l.starts_with("kernel ")))
        .map(|(_, body)| body)
        .collect();
    assert!(
        kernels.len() >= 3,
        "{} kernels in the README",
        kernels.len()
    );
    for code in kernels {
        let file = frontend::SourceFile::new("README.pf", code.as_str());
        frontend::parse(
            &file,
            frontend::Language::Kernel,
            &frontend::Options::default(),
        )
        .unwrap_or_else(|e| panic!("{}\n{code}", e.render(false)));
    }
}
