/* polybench.h -- a small stand-in for PolyBench/C 4.2's harness header.
 *
 * It provides the macros PolyBench kernels use (array declarations for prototypes and the
 * heap, loop-bound and data-type macros, dumping) with PolyBench's defaults, and the
 * timing instruments for -DPOLYBENCH_TIME. Kernels written for the real header build
 * unchanged. */
#ifndef POLYBENCH_H
# define POLYBENCH_H

# include <stdlib.h>
# include <string.h>
# include <stdio.h>

# ifndef POLYBENCH_PADDING_FACTOR
#  define POLYBENCH_PADDING_FACTOR 0
# endif

# ifdef POLYBENCH_USE_C99_PROTO
#  define POLYBENCH_C99_SELECT(x,y) y
# else
#  define POLYBENCH_C99_SELECT(x,y) x
# endif

# ifdef POLYBENCH_USE_SCALAR_LB
#  define POLYBENCH_LOOP_BOUND(x,y) x
# else
#  define POLYBENCH_LOOP_BOUND(x,y) y
# endif

# ifdef POLYBENCH_USE_RESTRICT
#  define POLYBENCH_RESTRICT restrict
# else
#  define POLYBENCH_RESTRICT
# endif

/* Arrays in prototypes. */
# define POLYBENCH_1D(var, dim1, ddim1) \
  var[POLYBENCH_RESTRICT POLYBENCH_C99_SELECT(dim1,ddim1) + POLYBENCH_PADDING_FACTOR]
# define POLYBENCH_2D(var, dim1, dim2, ddim1, ddim2) \
  var[POLYBENCH_RESTRICT POLYBENCH_C99_SELECT(dim1,ddim1) + POLYBENCH_PADDING_FACTOR] \
     [POLYBENCH_C99_SELECT(dim2,ddim2) + POLYBENCH_PADDING_FACTOR]
# define POLYBENCH_3D(var, dim1, dim2, dim3, ddim1, ddim2, ddim3) \
  var[POLYBENCH_RESTRICT POLYBENCH_C99_SELECT(dim1,ddim1) + POLYBENCH_PADDING_FACTOR] \
     [POLYBENCH_C99_SELECT(dim2,ddim2) + POLYBENCH_PADDING_FACTOR] \
     [POLYBENCH_C99_SELECT(dim3,ddim3) + POLYBENCH_PADDING_FACTOR]
# define POLYBENCH_4D(var, dim1, dim2, dim3, dim4, ddim1, ddim2, ddim3, ddim4) \
  var[POLYBENCH_RESTRICT POLYBENCH_C99_SELECT(dim1,ddim1) + POLYBENCH_PADDING_FACTOR] \
     [POLYBENCH_C99_SELECT(dim2,ddim2) + POLYBENCH_PADDING_FACTOR] \
     [POLYBENCH_C99_SELECT(dim3,ddim3) + POLYBENCH_PADDING_FACTOR] \
     [POLYBENCH_C99_SELECT(dim4,ddim4) + POLYBENCH_PADDING_FACTOR]

/* Heap arrays: `type (*var)[d2]...` pointing at zeroed memory. */
# define POLYBENCH_ARRAY(x) *x
# define POLYBENCH_FREE_ARRAY(x) free((void*)x);
# define POLYBENCH_ALLOC(n, type) polybench_alloc_data((n), sizeof(type))

# define POLYBENCH_1D_ARRAY_DECL(var, type, dim1, ddim1) \
  type (*var)[dim1 + POLYBENCH_PADDING_FACTOR] = \
    POLYBENCH_ALLOC((dim1 + POLYBENCH_PADDING_FACTOR), type);
# define POLYBENCH_2D_ARRAY_DECL(var, type, dim1, dim2, ddim1, ddim2) \
  type (*var)[dim1 + POLYBENCH_PADDING_FACTOR][dim2 + POLYBENCH_PADDING_FACTOR] = \
    POLYBENCH_ALLOC((dim1 + POLYBENCH_PADDING_FACTOR) * (dim2 + POLYBENCH_PADDING_FACTOR), type);
# define POLYBENCH_3D_ARRAY_DECL(var, type, dim1, dim2, dim3, ddim1, ddim2, ddim3) \
  type (*var)[dim1 + POLYBENCH_PADDING_FACTOR][dim2 + POLYBENCH_PADDING_FACTOR] \
             [dim3 + POLYBENCH_PADDING_FACTOR] = \
    POLYBENCH_ALLOC((dim1 + POLYBENCH_PADDING_FACTOR) * (dim2 + POLYBENCH_PADDING_FACTOR) \
                    * (dim3 + POLYBENCH_PADDING_FACTOR), type);

/* Dumping live-out data, only when asked for, as PolyBench does. */
# ifndef POLYBENCH_DUMP_ARRAYS
#  define POLYBENCH_DCE_ONLY_CODE if (argc > 42 && ! strcmp(argv[0], ""))
# else
#  define POLYBENCH_DCE_ONLY_CODE
# endif
# define POLYBENCH_DUMP_TARGET stderr
# define POLYBENCH_DUMP_START fprintf(POLYBENCH_DUMP_TARGET, "==BEGIN DUMP_ARRAYS==\n")
# define POLYBENCH_DUMP_FINISH fprintf(POLYBENCH_DUMP_TARGET, "==END   DUMP_ARRAYS==\n")
# define POLYBENCH_DUMP_BEGIN(s) fprintf(POLYBENCH_DUMP_TARGET, "begin dump: %s", s)
# define POLYBENCH_DUMP_END(s) fprintf(POLYBENCH_DUMP_TARGET, "\nend   dump: %s\n", s)
# define polybench_prevent_dce(func) POLYBENCH_DCE_ONLY_CODE func

/* Cache flushing: with POLYBENCH_CACHE_SIZE_KB defined, polybench_start_instruments first
 * writes and reads a buffer of twice that many KiB, so that the kernel starts with cold caches
 * (PolyBench flushes the same way before timing). */
# ifdef POLYBENCH_CACHE_SIZE_KB
static void polybench_flush_cache(void)
{
  size_t n = (size_t) POLYBENCH_CACHE_SIZE_KB * 2048 / sizeof(double);
  double *flush = (double *) malloc(n * sizeof(double));
  double sum = 0.0;
  size_t i;
  if (flush == NULL) {
    fprintf(stderr, "[PolyBench] out of memory\n");
    exit(1);
  }
  for (i = 0; i < n; i++)
    flush[i] = (double) i;
  for (i = 0; i < n; i++)
    sum += flush[i];
  if (sum < 0.0)
    printf("%f\n", sum);
  free(flush);
}
# else
static inline void polybench_flush_cache(void)
{
}
# endif

/* Timing instruments: with POLYBENCH_TIME, the kernel's wall-clock time in seconds is
 * printed on stdout, as PolyBench prints it; otherwise they are no-ops. */
# ifdef POLYBENCH_TIME
#  include <time.h>
static double polybench_t_start, polybench_t_end;
static double polybench_now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double) t.tv_sec + 1.0e-9 * (double) t.tv_nsec;
}
#  define polybench_start_instruments polybench_flush_cache(); polybench_t_start = polybench_now()
#  define polybench_stop_instruments polybench_t_end = polybench_now()
#  define polybench_print_instruments printf("%0.6f\n", polybench_t_end - polybench_t_start)
# else
#  define polybench_start_instruments polybench_flush_cache()
#  define polybench_stop_instruments
#  define polybench_print_instruments
# endif

static void* polybench_alloc_data(unsigned long long n, int elt_size)
{
  void* p = calloc(n, (size_t) elt_size);
  if (p == NULL) {
    fprintf(stderr, "[PolyBench] out of memory\n");
    exit(1);
  }
  return p;
}

#endif /* !POLYBENCH_H */
