/* A stand-in for the eval program of Inputs/train_linear.c's training
 * artifact (docs/design/training-artifact.md): the loss mean((x . w + b -
 * y)^2) of a batch, reading the training step's current w and b (bound by
 * name). On the fake CUDA driver it reads them where the training session
 * keeps them, in "device" memory.
 *
 * Arguments (B = 2 samples per batch, F = 3):
 *   0: w     parameter float32 [3]
 *   1: b     parameter float32 [1]
 *   2: x     input float32 [2, 3]
 *   3: y     input float32 [2]
 *   4: loss  output float32 []
 */
enum { B = 2, F = 3 };

void autopar_entry(void **args) {
  const float *w = args[0], *b = args[1], *x = args[2], *y = args[3];
  float *loss = args[4];
  float total = 0;
  for (int i = 0; i < B; ++i) {
    float pred = b[0];
    for (int f = 0; f < F; ++f)
      pred += x[i * F + f] * w[f];
    float err = pred - y[i];
    total += err * err;
  }
  *loss = total / B;
}
