// Note [torch's order of ties]: which of equal entries torch's CPU kernels put first is the
// order libstdc++'s algorithms leave (value, index) pairs in, so these run the same
// algorithms with the same comparators on the same pairs (ATen 2.13): ``sort(stable=False)``
// is std::sort (SortingKernel.cpp), ``topk`` std::partial_sort where k * 64 <= n, else
// std::nth_element, then std::sort of the first k - 1 when sorted (TopKImpl.h), and
// ``kthvalue`` ATen's own quickselect (SortingUtils.h's quick_select_template). NaN counts
// as above every number. Each writes the first k indices of every row's order.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace staged_order {

enum Kind { SORT = 0, TOPK = 1, KTH = 2 };

template <typename T>
inline bool isnan_(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

// torch's comparisons: NaN above every number
template <typename T>
inline bool gt_or_nan(T x, T y) {
  return (isnan_(x) && !isnan_(y)) || (x > y);
}

template <typename T>
using Elem = std::pair<T, int64_t>;

template <typename T>
inline bool gt(const Elem<T>& a, const Elem<T>& b) {
  return gt_or_nan(a.first, b.first);
}

template <typename T>
inline bool lt(const Elem<T>& a, const Elem<T>& b) {
  return (!isnan_(a.first) && isnan_(b.first)) || (a.first < b.first);
}

template <typename T>
void quick_select(std::vector<Elem<T>>& arr, int64_t k) {
  auto swap_fn = [&arr](int64_t i, int64_t j) { std::swap(arr[i], arr[j]); };
  int64_t L = 0, R = static_cast<int64_t>(arr.size()) - 1;
  while (true) {
    if (R <= L) return;
    if (R == L + 1) {
      if (gt_or_nan<T>(arr[L].first, arr[R].first)) swap_fn(L, R);
      return;
    }
    int64_t P = L + (R - L) / 2;
    swap_fn(P, L + 1);
    if (gt_or_nan<T>(arr[L + 1].first, arr[R].first)) swap_fn(L + 1, R);
    if (gt_or_nan<T>(arr[L].first, arr[R].first)) swap_fn(L, R);
    if (gt_or_nan<T>(arr[L + 1].first, arr[L].first)) swap_fn(L + 1, L);
    int64_t i = L + 1, j = R;
    T piv = arr[L].first;
    while (true) {
      do i++; while (gt_or_nan<T>(piv, arr[i].first));
      do j--; while (gt_or_nan<T>(arr[j].first, piv));
      if (j < i) break;
      swap_fn(i, j);
    }
    swap_fn(L, j);
    if (j <= k) L = i;
    if (j >= k) R = j - 1;
  }
}

template <typename T>
void order_rows(const T* v, int64_t rows, int64_t n, int kind, int64_t k, bool descending,
                bool sorted, int64_t* out) {
  std::vector<Elem<T>> e(n);
  auto before = descending ? gt<T> : lt<T>;
  for (int64_t r = 0; r < rows; ++r, v += n, out += k) {
    for (int64_t j = 0; j < n; ++j) e[j] = Elem<T>(v[j], j);
    if (kind == SORT) {
      std::sort(e.begin(), e.end(), before);
    } else if (kind == TOPK) {
      if (k * 64 <= n) {
        std::partial_sort(e.begin(), e.begin() + k, e.end(), before);
      } else {
        std::nth_element(e.begin(), e.begin() + k - 1, e.end(), before);
        if (sorted) std::sort(e.begin(), e.begin() + k - 1, before);
      }
    } else {
      quick_select(e, k - 1);
    }
    for (int64_t j = 0; j < k; ++j) out[j] = e[j].second;
  }
}

}  // namespace staged_order
