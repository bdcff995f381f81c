/* Stand-ins for the three stages of a compiled pipeline, one micro-batch of
 * MB rows of C floats per call (built with STAGE = 0, 1, 2):
 *
 *   stage 0 (x)          -> a = 2x, b = x + 1 (to stage 1); early = -x (output)
 *   stage 1 (a, b)       -> c = a + 1, b (forwarded) (to stage 2)
 *   stage 2 (x, c, b)    -> y = c * b + x (output)
 *
 * so y = (2x + 1)(x + 1) + x. Stage 2 takes the graph input x directly, and
 * stage 1 passes b through, as autopar-split-pipeline-stages arranges for a
 * value a non-adjacent stage needs. Arguments in the manifest's order. */
#include <stdint.h>

enum { N = MB * C };

void autopar_entry(void **args) {
#if STAGE == 0
  const float *x = args[0];
  float *a = args[1], *b = args[2], *early = args[3];
  for (int i = 0; i < N; ++i) {
    a[i] = 2 * x[i];
    b[i] = x[i] + 1;
    early[i] = -x[i];
  }
#elif STAGE == 1
  const float *a = args[0], *b = args[1];
  float *c = args[2], *forwarded = args[3];
  for (int i = 0; i < N; ++i) {
    c[i] = a[i] + 1;
    forwarded[i] = b[i];
  }
#else
  const float *x = args[0], *c = args[1], *b = args[2];
  float *y = args[3];
  for (int i = 0; i < N; ++i)
    y[i] = c[i] * b[i] + x[i];
#endif
}
