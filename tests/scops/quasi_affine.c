/* Divisions by constants in bounds and subscripts: C's `/` and `%` of dividends that keep
 * one sign over the loops (truncation is then a floor or a ceiling), and the `floord` /
 * `ceild` that Pluto writes, here with Pluto's own definitions (the front end knows them as
 * the floor and the ceiling of a division by a positive constant). */
// run: --target interp
// run: --target cpu
// run: --target cpu --no-tile
// run: --target cpu --size N=37
// run: --target gpu --gpu-f32
// run: --target npu --npu-f32 --size N=24
#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))
#define ceild(n, d) (((n) < 0) ? -((-(n)) / (d)) : ((n) + (d) - 1) / (d))
#define N 60
void k(double A[N][N], double B[N], double C[N], double D[N], double x[N]) {
  int i, j;
#pragma scop
  /* A triangle of half width: j <= i / 2. */
  for (i = 0; i < N; i++)
    for (j = 0; j <= i / 2; j++)
      A[i][j] = A[i][j] + x[j];
  /* Every third element of x, summed into B by the division's quotient. */
  for (i = 0; i < N; i++)
    B[i / 3] = B[i / 3] + x[i];
  /* Bounds as Pluto writes them. */
  for (i = ceild(N, 4); i <= floord(3 * N - 1, 4); i++)
    C[i] = x[i] * 2.0 + x[(i - 1) % 4];
  /* A dividend that is never positive: (-i) / 4 truncates toward zero. */
  for (i = 0; i < N; i++)
    D[N - 1 + (-i) / 4] = x[i] - D[(N - 1 - i) % 7];
#pragma endscop
}
