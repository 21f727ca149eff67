/* Sizes that are int locals, as many SCoPs outside PolyBench write them: the loop bounds
 * n, m and p are variables initialised before the region and never written in it; `--size`
 * overrides their initial values. */
// run: --target interp
// run: --target cpu
// run: --target cpu --size n=37 --size m=29 --size p=45
// run: --target gpu
// run: --target npu
void matmul(float A[64][48], float B[48][40], float C[64][40]) {
  int n = 64, m = 40, p = 48;
  int i, j, k;
#pragma scop
  for (i = 0; i < n; i++)
    for (j = 0; j < m; j++) {
      C[i][j] = 0.0f;
      for (k = 0; k < p; k++)
        C[i][j] += A[i][k] * B[k][j];
    }
#pragma endscop
}
