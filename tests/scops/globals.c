/* Arrays, a scalar and a size declared at file scope, as clan's and pet's test SCoPs declare
 * them; the function takes no parameters. */
// run: --target interp
// run: --target cpu
// run: --target gpu --gpu-f32
#define N 64
double A[N][N], x[N], y[N];
double alpha = 2.0;
int m = 48;

void mv(void) {
  int i, j;
#pragma scop
  for (i = 0; i < m; i++) {
    y[i] = 0.0;
    for (j = 0; j < N; j++)
      y[i] = y[i] + alpha * A[i][j] * x[j];
  }
#pragma endscop
}
