/* A fragment that declares nothing, as clan's test suite holds them: x and y are arrays of
 * double (as clan takes them), their extents inferred from the accesses, or given. */
// run: --target interp
// run: --target cpu
// run: --target cpu --extent x=120 --extent y=100
// run: --target gpu --gpu-f32
// run: --target npu --npu-f32
#pragma scop
for (i = 0; i < 100; i++)
  x[i] = y[i] + 1;
#pragma endscop
