/* A stage that calls a kernel autopar-run does not provide: loading it must
 * fail with the symbol's name, not crash in the middle of a step. */
void _mlir_ciface_autopar_cpu_no_such_kernel(void *);

void autopar_entry(void **args) {
  _mlir_ciface_autopar_cpu_no_such_kernel(args[0]);
}
