/* A stage whose code faults, standing in for a miscompiled program: the user
 * must learn which program crashed, and in which step. */
void autopar_entry(void **args) {
  volatile float *nowhere = (volatile float *)0;
  *nowhere = *(float *)args[0];
}
