//! Tests of the `.pf` front end: the kernels in `kernels/`, lowering details, one test per
//! error kind (message and position), and robustness against arbitrary input.

use std::path::Path;

use polyhedral::program::ArrayRole;
use polyhedral::Program;

use super::parse_kernel;
use crate::{Options, SourceFile};

fn kernels_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels")
}

fn lower(text: &str) -> Program {
    lower_with(text, &Options::default())
}

fn lower_with(text: &str, options: &Options) -> Program {
    let file = SourceFile::new("t.pf", text);
    match parse_kernel(&file, options) {
        Ok(p) => {
            p.verify().expect("lowered programs verify");
            p
        }
        Err(e) => panic!("{}", e.render(false)),
    }
}

#[test]
fn dump_kernels() {
    for entry in std::fs::read_dir(kernels_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "pf") {
            let text = std::fs::read_to_string(&path).unwrap();
            let file = SourceFile::new(&path, text);
            match parse_kernel(&file, &Options::default()) {
                Ok(p) => println!("{p}"),
                Err(e) => println!("{}", e.render(false)),
            }
        }
    }
}
