// a * b + c rounded once over contiguous arrays (Note [fused multiply-add] in
// elementwise.py). x86-64 CPUs without FMA (before 2013) get C's fma, a libm call per
// element; with it, the loop is compiled for AVX2 and FMA and vectorized (8 floats an
// instruction), chosen at run time.
#pragma once
#include <cmath>
#include <cstdint>

namespace staged_fma {

// b_step, c_step 0: b[0], c[0] for every element (a scalar operand), else 1
template <typename T>
static void loop_portable(const T* a, const T* b, int64_t b_step, const T* c, int64_t c_step,
                          T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::fma(a[i], b[i * b_step], c[i * c_step]);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
template <typename T>
__attribute__((target("avx2,fma"))) static void loop_fma(const T* a, const T* b,
                                                         int64_t b_step, const T* c,
                                                         int64_t c_step, T* out, int64_t n) {
  if (c_step == 0) {  // tanh's gradient: 1 - y * y
    const T t = c[0];
    if (b_step == 0) {
      const T s = b[0];
      for (int64_t i = 0; i < n; ++i) out[i] = std::fma(a[i], s, t);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = std::fma(a[i], b[i], t);
    }
  } else if (b_step == 0) {
    const T s = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(a[i], s, c[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(a[i], b[i], c[i]);
  }
}

template <typename T>
void fma_loop(const T* a, const T* b, int64_t b_step, const T* c, int64_t c_step, T* out,
              int64_t n) {
  static const bool has_fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  if (has_fma)
    loop_fma(a, b, b_step, c, c_step, out, n);
  else
    loop_portable(a, b, b_step, c, c_step, out, n);
}
#else
template <typename T>
void fma_loop(const T* a, const T* b, int64_t b_step, const T* c, int64_t c_step, T* out,
              int64_t n) {
  loop_portable(a, b, b_step, c, c_step, out, n);
}
#endif

}  // namespace staged_fma
