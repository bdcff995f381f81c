//===- Multiversion.h - Loops compiled for several x86 levels ---*- C++ -*-===//
//
// The runtime is built for baseline x86-64 so that one binary runs on every
// node of a cluster, but baseline code moves 4 floats per instruction where
// AVX-512 moves 16. Functions marked AUTOPAR_MULTIVERSION are compiled for
// x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA) and the baseline, and the
// dynamic loader picks the best one for the CPU (GCC function
// multiversioning, resolved through an ifunc). Mark whole hot loops, not
// their bodies: each call goes through the indirect dispatch.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_MULTIVERSION_H
#define AUTOPAR_RUNTIME_CPU_MULTIVERSION_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&         \
    defined(__ELF__)
#define AUTOPAR_MULTIVERSION                                                   \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define AUTOPAR_MULTIVERSION
#endif

#endif // AUTOPAR_RUNTIME_CPU_MULTIVERSION_H
