/* Undeclared sizes, scalars and a two-dimensional array: n and m appear only in bounds (sizes,
 * their values from --size), alpha is only read (a scalar input), s is written (a scalar). */
// run: --target interp --size n=30 --size m=20
// run: --target cpu --size n=30 --size m=20
// run: --target cpu --size n=7 --size m=9 --extent C=8x10 --extent v=7
// run: --target gpu --gpu-f32 --size n=30 --size m=20
#pragma scop
for (i = 0; i < n; i++) {
  s = 0.0;
  for (j = 0; j < m; j++) {
    C[i][j] = alpha * C[i][j] + 1.0;
    s = s + C[i][j];
  }
  v[i] = s;
}
#pragma endscop
