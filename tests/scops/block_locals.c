/* Variables declared inside the SCoP, block-scoped: a row sum held in a scalar declared in the
 * loop body, a counter declared without a value, and the iterators declared in the for. */
// run: --target interp
// run: --target cpu
// run: --target cpu --fuse maxfuse --threads 2
// run: --target gpu --gpu-f32
void row_sums(double A[40][30], double r[40], double c[30]) {
#pragma scop
  for (int i = 0; i < 40; i++) {
    double s = 0.0;
    int unused;
    for (int j = 0; j < 30; j++)
      s += A[i][j];
    r[i] = s;
  }
  for (int j = 0; j < 30; j++) {
    double s = A[0][j];
    for (int i = 1; i < 40; i++)
      s = s + A[i][j];
    c[j] = s;
  }
#pragma endscop
}
