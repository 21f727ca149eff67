use polyhedral::schedule::pluto::{self, Fusion, Options};
use std::path::Path;

#[test]
#[ignore]
fn explore() {
    let name = std::env::var("K").unwrap();
    let fuse = Fusion::from_name(&std::env::var("F").unwrap_or("smartfuse".into())).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels").join(&name);
    let opts = frontend::Options { defines: vec![("MINI_DATASET".into(), None)], ..Default::default() };
    let p = frontend::load(&path, &opts).unwrap();
    let deps = polyhedral::deps::compute_dependences(&p).unwrap();
    let t = std::time::Instant::now();
    let s = pluto::schedule(&p, &deps, &Options { fuse, ..Default::default() }).unwrap();
    println!("{:?}\n{}", t.elapsed(), s.display(&p));
    let t = std::time::Instant::now();
    pluto::check_legality(&p, &deps, &s).unwrap();
    println!("legal {:?}", t.elapsed());
}
