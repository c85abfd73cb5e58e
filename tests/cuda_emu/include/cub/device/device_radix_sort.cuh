// cub/device/device_radix_sort.cuh for the host emulation: shadows CUB's header (tests/cuda_emu/include comes
// first on the emulated build's include path) with cub::DeviceRadixSort::SortPairs as CUB documents it:
//   - the two-call protocol: d_temp_storage NULL sets temp_storage_bytes and does nothing else; the second
//     call needs at least that many bytes (cudaErrorInvalidValue otherwise, as CUB's AliasTemporaries);
//   - keys compared on bits [begin_bit, end_bit) only, the sort STABLE (equal keys keep their input order),
//     the full keys and their values written to the outputs;
//   - the input and output ranges must not overlap, and every range must be device memory (a GPU would
//     fault: reported, then abort);
//   - the work runs in stream order (ct_emu::stream_submit), and overwrites the temporary storage, so
//     a temporary that overlaps live data shows.
#ifndef CT_EMU_CUB_DEVICE_RADIX_SORT_CUH
#define CT_EMU_CUB_DEVICE_RADIX_SORT_CUH
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <type_traits>
#include <vector>
#include "../../../emu_stream.h"

namespace cub {

struct DeviceRadixSort {
    template <typename KeyT, typename ValueT, typename NumItemsT>
    static cudaError_t SortPairs(void *d_temp_storage, size_t &temp_storage_bytes, const KeyT *d_keys_in,
                                 KeyT *d_keys_out, const ValueT *d_values_in, ValueT *d_values_out,
                                 NumItemsT num_items, int begin_bit = 0, int end_bit = sizeof(KeyT) * 8,
                                 cudaStream_t stream = 0) {
        static_assert(std::is_unsigned<KeyT>::value, "the emulated SortPairs takes unsigned integer keys");
        const size_t n = num_items > 0 ? (size_t)num_items : 0;
        // What the emulated sort says it needs: room for a key and a value per item, and a header.
        const size_t need = 256 + n * (sizeof(KeyT) + sizeof(ValueT));
        if (!d_temp_storage) {
            temp_storage_bytes = need;
            return cudaSuccess;
        }
        if (temp_storage_bytes < need) return cudaErrorInvalidValue;
        if (begin_bit < 0 || end_bit > (int)(sizeof(KeyT) * 8) || begin_bit > end_bit) return cudaErrorInvalidValue;
        if (!n) return cudaSuccess;
        check("temporary storage", d_temp_storage, temp_storage_bytes);
        check("d_keys_in", d_keys_in, n * sizeof(KeyT));
        check("d_keys_out", d_keys_out, n * sizeof(KeyT));
        check("d_values_in", d_values_in, n * sizeof(ValueT));
        check("d_values_out", d_values_out, n * sizeof(ValueT));
        disjoint("d_keys_in", d_keys_in, "d_keys_out", d_keys_out, n * sizeof(KeyT));
        disjoint("d_values_in", d_values_in, "d_values_out", d_values_out, n * sizeof(ValueT));
        const int lo = begin_bit, width = end_bit - begin_bit;
        void *tmp = d_temp_storage;
        const size_t tmp_bytes = temp_storage_bytes;
        ct_emu::stream_submit(stream, [=]() {
            auto digit = [&](KeyT k) -> uint64_t {
                if (width == 0) return 0;
                uint64_t v = (uint64_t)k >> lo;
                return width >= 64 ? v : v & ((uint64_t(1) << width) - 1);
            };
            std::vector<size_t> order(n);
            for (size_t i = 0; i < n; i++) order[i] = i;
            std::stable_sort(order.begin(), order.end(),
                             [&](size_t a, size_t b) { return digit(d_keys_in[a]) < digit(d_keys_in[b]); });
            std::vector<KeyT> keys(n);
            std::vector<ValueT> vals(n);
            for (size_t i = 0; i < n; i++) {
                keys[i] = d_keys_in[order[i]];
                vals[i] = d_values_in[order[i]];
            }
            memset(tmp, 0xA5, tmp_bytes);   // CUB's passes use it: nothing else may live there
            memcpy(d_keys_out, keys.data(), n * sizeof(KeyT));
            memcpy(d_values_out, vals.data(), n * sizeof(ValueT));
        }, "cub::DeviceRadixSort::SortPairs");
        return cudaSuccess;
    }

private:
    static void check(const char *name, const void *p, size_t bytes) {
        if (p && ct_emu::device_range(p, bytes)) return;
        fprintf(stderr, "cub_emu: SortPairs: %s [%p, +%zu bytes) is not inside one live device allocation: the GPU "
                        "would fault here\n", name, p, bytes);
        fflush(stderr);
        abort();
    }
    static void disjoint(const char *an, const void *a, const char *bn, const void *b, size_t bytes) {
        uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
        if (x + bytes <= y || y + bytes <= x) return;
        fprintf(stderr, "cub_emu: SortPairs: %s and %s overlap (CUB requires distinct ranges)\n", an, bn);
        fflush(stderr);
        abort();
    }
};

}  // namespace cub
#endif
