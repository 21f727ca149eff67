/* Loops with strides other than 1: a red-black sweep (odd points, then even ones, each from
 * its neighbours of the other colour), counting up by 2 from two starts, and a loop counting
 * down by 3. */
// run: --target interp
// run: --target cpu
// run: --target cpu --no-tile --threads 2
// run: --target gpu --gpu-f32
#define N 101
void red_black(double A[N], double B[N]) {
  int t, i;
#pragma scop
  for (t = 0; t < 4; t++) {
    for (i = 1; i < N - 1; i += 2)
      A[i] = 0.5 * (A[i - 1] + A[i + 1]);
    for (i = 2; i < N - 1; i += 2)
      A[i] = 0.5 * (A[i - 1] + A[i + 1]);
  }
  for (i = N - 1; i >= 0; i -= 3)
    B[i] = A[i] * 2.0;
#pragma endscop
}
