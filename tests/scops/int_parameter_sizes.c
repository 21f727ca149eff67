/* A size that is an int parameter of the kernel function, with no value in the file: the
 * run gives it with --size. The time loop's bound is a local. */
// run: --target interp --size n=100
// run: --target cpu --size n=100
// run: --target cpu --size n=57 --threads 2
// run: --target gpu --gpu-f32 --size n=100
void smooth(int n, double A[100], double B[100]) {
  int steps = 4;
  int t, i;
#pragma scop
  for (t = 0; t < steps; t++) {
    for (i = 1; i < n - 1; i++)
      B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0;
    for (i = 1; i < n - 1; i++)
      A[i] = B[i];
  }
#pragma endscop
}
