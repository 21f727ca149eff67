// The kernel writes only the first M - 2 elements of its output; the others keep the caller's
// contents. The accelerator declared the output `out`, so the simulator started it from
// zeros and the elements the kernel leaves alone came back as 0.
// run: --target npu
// run: --target cpu
#include <math.h>

#define M 5

void output_written_in_part(float alpha, float O1[M])
{
  int i;
#pragma scop
  for (i = 0; i < M - 2; i++)
    O1[i] = alpha / (fabsf(3.0f) + 1.0f);
#pragma endscop
}
