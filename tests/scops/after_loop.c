/* Iterators read after their loops: each holds the first value its loop's condition
 * refused (the last iteration's value plus the step), or its start where the loop does not
 * run; whether it ran may depend on the sizes and on outer iterators. */
// run: --target interp
// run: --target interp --size N=1
// run: --target cpu
// run: --target cpu --size N=1
// run: --target gpu --gpu-f32
// run: --target npu --npu-f32
#define N 50
#define T 6
void k(double a[N], double b[N], double c[N + 3], double d[T], double e[T], double f[N + 1]) {
  int i, j, t, k, m;
#pragma scop
  for (i = 0; i < N - 1; i++)
    a[i] = b[i];
  a[i] = i;
  /* A strided loop ends at the first multiple of 3 not below N. */
  for (j = 0; j < N; j += 3)
    c[j] = b[j / 3];
  c[j] = j;
  /* A loop that starts where the first one ended, and what it leaves. */
  for (m = i; m < N; m++)
    f[m] = a[m - i] + m;
  f[m] = m;
  /* The inner loop runs t times: k is t after it, also for t = 0. */
  for (t = 0; t < T; t++) {
    for (k = 0; k < t; k++)
      d[t] = d[t] + e[k];
    e[t] = k + d[t];
  }
#pragma endscop
}
