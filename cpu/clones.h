/* STARFA_CPU_CLONES before a hot kernel: GCC builds it for x86-64-v4 (AVX-512), x86-64-v3 (AVX2,
 * FMA) and the baseline, and picks the best for the running CPU at load time. Nothing elsewhere
 * (clang, ASan builds, other architectures). */
#ifndef STARFA_CPU_CLONES_H
#define STARFA_CPU_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define STARFA_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define STARFA_CPU_CLONES
#endif

#endif
