/* Jacobi-1d in two rows used in turn, as time-tiled codes write it: iteration t reads row
 * t % 2 and writes row (t + 1) % 2. The subscripts are quasi-affine; the dependences stay
 * exact (a value flows to the next iteration, a row is overwritten two iterations later). */
// run: --target interp
// run: --target cpu
// run: --target cpu --no-tile --threads 2
// run: --target cpu --size T=7 --size N=41
// run: --target gpu --gpu-f32
// run: --target npu --npu-f32 --size T=4 --size N=40
#define N 100
#define T 10
double A[2][N];
void k() {
  int t, i;
#pragma scop
  for (t = 0; t < T; t++)
    for (i = 1; i < N - 1; i++)
      A[(t + 1) % 2][i] = 0.33 * (A[t % 2][i - 1] + A[t % 2][i] + A[t % 2][i + 1]);
#pragma endscop
}
