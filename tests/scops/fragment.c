/* A bare fragment: a SCoP outside any function, its arrays and sizes declared at file scope,
 * as the regression suites of clan and Pluto hold them. */
// run: --target interp
// run: --target cpu
// run: --target cpu --size n=20
// run: --target gpu --gpu-f32
int n = 30;
double a[30][30], b[30][30];
int i, j;

#pragma scop
for (i = 1; i < n - 1; i++)
  for (j = 1; j < n - 1; j++)
    b[i][j] = 0.25 * (a[i - 1][j] + a[i + 1][j] + a[i][j - 1] + a[i][j + 1]);
#pragma endscop
