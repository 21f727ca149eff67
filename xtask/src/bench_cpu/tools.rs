//! The compilers and libraries the CPU benchmark compares against, installed with apt-get
//! when they are missing: a clang with Polly (Debian's `clang-14` has it built in; its
//! OpenMP runtime is `libomp-14-dev`) and OpenBLAS (`libopenblas-dev`).

use std::path::Path;
use std::process::Command;

use super::process::Toolchain;
use crate::apt_install;

const POLLY_CLANGS: [&str; 7] = [
    "clang", "clang-19", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14",
];
const POLLY_PACKAGES: [&str; 2] = ["clang-14", "libomp-14-dev"];

/// Polly's two builds: sequential, and parallel with OpenMP.
pub(crate) struct Polly {
    pub(crate) sequential: Toolchain,
    pub(crate) parallel: Toolchain,
}

/// The first clang that builds a small loop nest with Polly both ways, installing one when
/// there is none; why there is none otherwise.
pub(crate) fn polly(work: &Path) -> Result<Polly, String> {
    if let Some(p) = find_polly(work) {
        return Ok(p);
    }
    println!(
        "no clang with Polly: installing {}",
        POLLY_PACKAGES.join(" ")
    );
    apt_install(&POLLY_PACKAGES);
    find_polly(work).ok_or_else(|| {
        format!(
            "no clang with Polly, and apt-get could not install {}",
            POLLY_PACKAGES.join(" ")
        )
    })
}

fn polly_toolchains(cc: &str) -> Polly {
    Polly {
        sequential: Toolchain::new(cc, &["-mllvm", "-polly"]),
        parallel: Toolchain::new(
            cc,
            &["-mllvm", "-polly", "-mllvm", "-polly-parallel", "-fopenmp"],
        ),
    }
}

fn find_polly(work: &Path) -> Option<Polly> {
    let probe = work.join("polly-probe.c");
    std::fs::write(
        &probe,
        "double a[64][64];\nint main(void){for(int i=0;i<64;i++)for(int j=0;j<64;j++)\
         a[i][j]+=i*j;return (int)a[3][5];}\n",
    )
    .ok()?;
    POLLY_CLANGS.into_iter().find_map(|cc| {
        let p = polly_toolchains(cc);
        let builds = [&p.sequential, &p.parallel].into_iter().all(|t| {
            Command::new(&t.cc)
                .arg("-O3")
                .args(&t.flags)
                .arg(&probe)
                .arg("-o")
                .arg(work.join("polly-probe"))
                .output()
                .is_ok_and(|o| o.status.success())
        });
        builds.then_some(p)
    })
}

/// gemm through OpenBLAS's `cblas_dgemm`, on PolyBench's gemm sizes and initial values: the
/// program prints the seconds of the call (as PolyBench's timer does), or, given any
/// argument, the number of floating-point operations of the product (2·NI·NJ·NK).
pub(crate) const OPENBLAS_GEMM: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include "gemm.h"

void cblas_dgemm(int order, int trans_a, int trans_b, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb, double beta, double *c,
                 int ldc);

static double now(void) {
  struct timeval t;
  gettimeofday(&t, NULL);
  return t.tv_sec + t.tv_usec * 1.0e-6;
}

int main(int argc, char **argv) {
  int ni = NI, nj = NJ, nk = NK;
  if (argc > 1) {
    printf("%.0f\n", 2.0 * ni * nj * nk);
    return 0;
  }
  double *A = malloc(sizeof(double) * ni * nk);
  double *B = malloc(sizeof(double) * nk * nj);
  double *C = malloc(sizeof(double) * ni * nj);
  double alpha = 1.5, beta = 1.2, one = 1.0;
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++)
      C[i * nj + j] = (double)((i * j + 1) % ni) / ni;
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nk; j++)
      A[i * nk + j] = (double)(i * (j + 1) % nk) / nk;
  for (int i = 0; i < nk; i++)
    for (int j = 0; j < nj; j++)
      B[i * nj + j] = (double)(i * (j + 2) % nj) / nj;
  /* Start the library's threads outside the timed call. */
  cblas_dgemm(101, 111, 111, 1, 1, 1, 1.0, &one, 1, &one, 1, 0.0, &one, 1);
  double t = now();
  cblas_dgemm(101, 111, 111, ni, nj, nk, alpha, A, nk, B, nj, beta, C, nj);
  t = now() - t;
  double sum = 0;
  for (int i = 0; i < ni * nj; i++)
    sum += C[i];
  fprintf(stderr, "%g\n", sum);
  printf("%0.6f\n", t);
  free(A);
  free(B);
  free(C);
  return 0;
}
"#;

const OPENBLAS_PACKAGES: [&str; 1] = ["libopenblas-dev"];

/// gcc linking OpenBLAS, installing the library when it does not link; why not otherwise.
pub(crate) fn openblas(work: &Path) -> Result<Toolchain, String> {
    let probe = work.join("openblas-probe.c");
    std::fs::write(
        &probe,
        "double cblas_ddot(int, const double *, int, const double *, int);\n\
         int main(void){double x[2]={1,2};return cblas_ddot(2,x,1,x,1)==5.0?0:1;}\n",
    )
    .map_err(|e| format!("{}: {e}", probe.display()))?;
    let links = || {
        let binary = work.join("openblas-probe");
        Command::new("gcc")
            .arg(&probe)
            .arg("-o")
            .arg(&binary)
            .arg("-lopenblas")
            .output()
            .is_ok_and(|o| o.status.success())
            && Command::new(&binary)
                .env("OPENBLAS_NUM_THREADS", "1")
                .status()
                .is_ok_and(|s| s.success())
    };
    if !links() {
        println!(
            "OpenBLAS does not link: installing {}",
            OPENBLAS_PACKAGES.join(" ")
        );
        apt_install(&OPENBLAS_PACKAGES);
        if !links() {
            return Err(format!(
                "OpenBLAS is not installed and apt-get could not install {}",
                OPENBLAS_PACKAGES.join(" ")
            ));
        }
    }
    let mut tools = Toolchain::new("gcc", &[]);
    tools.libs.push("-lopenblas".into());
    Ok(tools)
}

/// The CPU model polyfuse optimizes for in the benchmark (its `--cpu`).
pub(crate) struct HostCpu {
    pub(crate) name: &'static str,
    pub(crate) about: &'static str,
}

/// The named model of this machine's vectors, as `polyfuse compile --cpu native` picks it
/// (the models are `backends::cpu::models`): AVX-512 (x86-64-v4) where `/proc/cpuinfo` lists
/// its features, AVX2 (x86-64-v3) otherwise. The benchmark names it rather than passing
/// `native`, which also reads this machine's caches, so that the table's code is the code any
/// machine generates for that model.
pub(crate) fn host_cpu() -> HostCpu {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.trim() == "flags"))
        .map(|(_, v)| v.split_whitespace().collect())
        .unwrap_or_default();
    let wide = ["avx512f", "avx512bw", "avx512dq", "avx512vl"];
    if wide.iter().all(|f| flags.contains(f)) {
        HostCpu {
            name: "x86-64-v4",
            about: "AVX-512: 64-byte vectors, 32 vector registers",
        }
    } else {
        HostCpu {
            name: "x86-64-v3",
            about: "AVX2: 32-byte vectors, 16 vector registers",
        }
    }
}
