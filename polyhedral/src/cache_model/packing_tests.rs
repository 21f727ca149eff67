//! The model of packed buffers against an exact LRU simulation: tiled matmul with `C` packed
//! above the `k` tile loop (copied in before it and back after it) and `B` above the point
//! loops (copied in for every tile of `k`), the code the back end writes for such marks, its
//! trace written out loop by loop with the copies.

use super::eval::predict;
use super::lru_tests::{level, loops3, lru_misses, matmul, LINE, PLACEMENTS};
use super::*;
use crate::program::ArrayId;

/// Five line offsets below 4096 lines, a fixed pseudo-random sequence per `k`: A, B, C and
/// the buffers of B and C.
fn bases5(k: u64) -> [u64; 5] {
    let mut x = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    [0, 1, 2, 3, 4].map(|a| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (a << 20) + (x % 4096) * LINE
    })
}

/// The trace of matmul at `n` with tiles `t` (loops `i`, `j`, `k`, then the points), `C`
/// packed per tile of `i` and `j` into a buffer of `t[0] × t[1]` and `B` per tile of `i`, `j`
/// and `k` into one of `t[2] × t[1]`: each copy walks the box row by row, reading one element
/// and writing the other; per instance the loops read `C'`, `A`, `B'` and write `C'`.
fn packed_trace(n: u64, t: [u64; 3], base: [u64; 5]) -> Vec<u64> {
    let at = |array: usize, pitch: u64, r: u64, c: u64| base[array] + (r * pitch + c) * 8;
    let (a, b, c, bp, cp) = (0, 1, 2, 3, 4);
    let mut trace = Vec::new();
    for ti in (0..n).step_by(t[0] as usize) {
        for tj in (0..n).step_by(t[1] as usize) {
            let rows = ti..(ti + t[0]).min(n);
            let cols = tj..(tj + t[1]).min(n);
            for i in rows.clone() {
                for j in cols.clone() {
                    trace.push(at(c, n, i, j));
                    trace.push(at(cp, t[1], i - ti, j - tj));
                }
            }
            for tk in (0..n).step_by(t[2] as usize) {
                let depth = tk..(tk + t[2]).min(n);
                for k in depth.clone() {
                    for j in cols.clone() {
                        trace.push(at(b, n, k, j));
                        trace.push(at(bp, t[1], k - tk, j - tj));
                    }
                }
                for i in rows.clone() {
                    for j in cols.clone() {
                        for k in depth.clone() {
                            trace.push(at(cp, t[1], i - ti, j - tj));
                            trace.push(at(a, n, i, k));
                            trace.push(at(bp, t[1], k - tk, j - tj));
                            trace.push(at(cp, t[1], i - ti, j - tj));
                        }
                    }
                }
            }
            for i in rows.clone() {
                for j in cols.clone() {
                    trace.push(at(cp, t[1], i - ti, j - tj));
                    trace.push(at(c, n, i, j));
                }
            }
        }
    }
    trace
}

/// The model of that code: matmul's band tiled, with the two marks.
fn packed_model(n: i64, t: [i64; 3]) -> Model {
    let p = matmul(n);
    let schedule = loops3();
    let model =
        Model::with_band_tiled(&p, &schedule, &schedule.bands[0], &[0, 1, 2], None).unwrap();
    let packings = [
        Packing {
            array: ArrayId(2),
            layout: vec![0, 1],
            depth: 2,
            stmts: vec![0],
        },
        Packing {
            array: ArrayId(1),
            layout: vec![0, 1],
            depth: 3,
            stmts: vec![0],
        },
    ];
    model.with_packing(&p, &packings, &t).unwrap()
}

const CASES: [(i64, [i64; 3]); 4] = [
    (32, [8, 8, 8]),
    (32, [16, 16, 16]),
    (48, [16, 8, 16]),
    (40, [8, 16, 4]),
];

#[test]
fn packed_buffers_count_their_lines_and_their_copies() {
    // A cache as large as everything holds each line once: A, B, C and the two buffers.
    // Lines of 16 bytes hold two elements; the buffers' rows are whole lines.
    for (n, t) in CASES {
        let all = level(1, 1 << 14);
        let predicted = predict(&packed_model(n, t), &t, &[all]);
        let n = n as f64;
        let lines = 3.0 * n * n / 2.0 + (t[0] * t[1] + t[2] * t[1]) as f64 / 2.0;
        assert_eq!(predicted.compulsory, lines, "n {n}, tiles {t:?}");
        assert_eq!(predicted.misses[0], lines, "n {n}, tiles {t:?}");
        // Five groups: the arrays, then the buffers of C and B.
        let buffers: Vec<bool> = predicted.arrays.iter().map(|a| a.1).collect();
        assert_eq!(buffers, [false, false, false, true, true]);
    }
}

#[test]
fn packed_misses_match_an_lru_simulation() {
    // Fully associative caches (one set) within a fifth. Set-associative caches (sets × ways) within 40%: the model
    // overestimates the misses of the buffer of B (by up to a third, in caches of about two
    // of its copies), whose copy in and loops share the cache's sets with the copy of B's box
    // and A's rows.
    let full = [(1, 16), (1, 64), (1, 256)];
    let associative = [(8, 4), (16, 8), (64, 2), (32, 4)];
    for (caches, tolerance) in [(&full[..], 0.2), (&associative[..], 0.4)] {
        let levels: Vec<Level> = caches.iter().map(|&(s, w)| level(s, w)).collect();
        for (n, t) in CASES {
            let predicted = predict(&packed_model(n, t), &t, &levels);
            let mut simulated = vec![0.0; levels.len()];
            for k in 0..PLACEMENTS {
                let trace = packed_trace(n as u64, t.map(|x| x as u64), bases5(k));
                for (sim, l) in simulated.iter_mut().zip(&levels) {
                    *sim += lru_misses(&trace, l.sets, l.ways as usize) as f64 / PLACEMENTS as f64;
                }
            }
            for ((l, &predicted), simulated) in levels.iter().zip(&predicted.misses).zip(simulated)
            {
                let error = (predicted - simulated) / simulated;
                assert!(
                    error.abs() <= tolerance,
                    "n {n}, tiles {t:?}, {}: predicted {predicted}, simulated {simulated}",
                    l.name
                );
            }
        }
    }
}

#[test]
fn packing_moves_the_loops_accesses_into_the_buffers() {
    // In a cache that holds everything, packing adds the buffers' lines and nothing else;
    // without the marks the model is the unpacked one.
    let (n, t) = (32, [8, 8, 8]);
    let p = matmul(n);
    let schedule = loops3();
    let plain =
        Model::with_band_tiled(&p, &schedule, &schedule.bands[0], &[0, 1, 2], None).unwrap();
    let all = [level(1, 1 << 14)];
    let unpacked = predict(&plain, &t, &all);
    let none = plain.with_packing(&p, &[], &t).unwrap();
    assert_eq!(predict(&none, &t, &all), unpacked);
    let packed = predict(&packed_model(n, t), &t, &all);
    assert_eq!(packed.compulsory, unpacked.compulsory + 64.0);
    // A buffer larger than the back end packs is left out, as the back end leaves it.
    let huge = [1 << 20, 1 << 20, 1 << 20];
    let big = Model::with_band_tiled(
        &matmul(1 << 10),
        &schedule,
        &schedule.bands[0],
        &[0, 1, 2],
        None,
    )
    .unwrap();
    let packing = Packing {
        array: ArrayId(1),
        layout: vec![0, 1],
        depth: 3,
        stmts: vec![0],
    };
    let kept = big
        .with_packing(&matmul(1 << 10), &[packing], &huge)
        .unwrap();
    assert!(kept.groups.iter().all(|g| g.buffer.is_none()));
}
