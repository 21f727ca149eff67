/* Fixed-width and size types from <stdint.h> and <stddef.h>: int32_t arrays, a size_t size
 * and uint32_t iterators. */
// run: --target interp --size n=24
// run: --target cpu --size n=24
// run: --target gpu --size n=24
#include <stdint.h>
#include <stddef.h>
void scale(size_t n, int32_t X[24], int32_t Y[24]) {
  uint32_t i;
#pragma scop
  for (i = 0; i < n; i++)
    Y[i] = 3 * X[i] - 1;
#pragma endscop
}
