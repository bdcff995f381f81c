/* A stand-in for a compiled training step (docs/design/training-artifact.md):
 * linear regression pred = x . w + b, loss = mean((pred - y)^2), SGD with
 * momentum at lr = 0.1 / step, and a non-trainable counter of the samples
 * seen (a "state" parameter, like batch-norm running statistics). The rate
 * depends on the step and the update on the optimizer state, so a resume
 * that restored either wrongly gives other numbers.
 *
 * Arguments, in the manifest's order (B = 2 samples per step, F = 3):
 *   0: w            parameter float32 [3] (trainable)
 *   1: b            parameter float32 [1] (trainable)
 *   2: seen         parameter float32 [1] (not trainable, updated)
 *   3: w.momentum   optimizer_state [3]
 *   4: b.momentum   optimizer_state [1]
 *   5: step         int64 []
 *   6: x            input float32 [2, 3]
 *   7: y            input float32 [2]
 *   8: loss         output float32 []
 *   9: lr           metric float32 []
 *  10: grad_norm    metric float32 []
 *  11: w.next  12: b.next  13: seen.next  14: w.momentum.next
 *  15: b.momentum.next   updates of 0, 1, 2, 3, 4
 */
#include <math.h>
#include <stdint.h>

enum { B = 2, F = 3 };

void autopar_entry(void **args) {
  const float *w = args[0], *b = args[1], *seen = args[2];
  const float *mw = args[3], *mb = args[4];
  int64_t step = *(const int64_t *)args[5];
  const float *x = args[6], *y = args[7];
  float *loss = args[8], *lr = args[9], *norm = args[10];
  float *w2 = args[11], *b2 = args[12], *seen2 = args[13];
  float *mw2 = args[14], *mb2 = args[15];

  float gw[F] = {0}, gb = 0, total = 0;
  for (int i = 0; i < B; ++i) {
    float pred = b[0];
    for (int f = 0; f < F; ++f)
      pred += x[i * F + f] * w[f];
    float err = pred - y[i];
    total += err * err;
    for (int f = 0; f < F; ++f)
      gw[f] += 2.0f * err * x[i * F + f] / B;
    gb += 2.0f * err / B;
  }
  *loss = total / B;
  *lr = 0.1f / (float)step;
  float sq = gb * gb;
  for (int f = 0; f < F; ++f)
    sq += gw[f] * gw[f];
  *norm = sqrtf(sq);
  for (int f = 0; f < F; ++f) {
    mw2[f] = 0.9f * mw[f] + gw[f];
    w2[f] = w[f] - *lr * mw2[f];
  }
  mb2[0] = 0.9f * mb[0] + gb;
  b2[0] = b[0] - *lr * mb2[0];
  seen2[0] = seen[0] + B;
}
