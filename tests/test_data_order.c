// Training windows: sequential order walks the split window after window across steps; random order
// stays inside the split; both give each global sample the same window however a step is split
// into micro-batches.
#include <string.h>
#include "check.h"
#include "data/dataset.h"
#include "util/common.h"

int main(void) {
    Dataset ds = {0};
    ds.n = 1000;
    ds.n_train = 900;
    ds.tokens = xmalloc(ds.n * sizeof(int32_t));
    for (size_t i = 0; i < ds.n; i++) ds.tokens[i] = (int32_t)i;   // token = its position
    enum { S = 10, B = 8 };
    int32_t tok[S * B], tgt[S * B], tok4[S * 4], tgt4[S * 4];

    // Sequential: step 3, sample 5 of 8 per step is window k = 2·8 + 5 = 21, starting at 210.
    dataset_train_batch(&ds, S, B, DATA_SEQUENTIAL, 1, 3, 0, B, tok, tgt);
    CHECK(tok[0 * B + 5] == 210 && tok[9 * B + 5] == 219 && tgt[9 * B + 5] == 220, "sequential window 21 starts at %d",
          tok[5]);
    // It wraps inside the split: window 95 would start at 950 > 890, so it starts at 950 mod 890 = 60.
    dataset_train_batch(&ds, S, B, DATA_SEQUENTIAL, 1, 12, 0, B, tok, tgt);   // window 88 + bi
    CHECK(tok[7] == (int32_t)((95 * S) % 890), "sequential wrap: got %d", tok[7]);

    for (int order = 0; order < 2; order++) {
        int inside = 1, consistent = 1;
        for (uint32_t step = 1; step <= 200; step++) {
            dataset_train_batch(&ds, S, B, (DataOrder)order, 42, step, 0, B, tok, tgt);
            for (int bi = 0; bi < B; bi++)
                for (int si = 0; si < S; si++) {
                    // targets are the next token and never reach the validation split
                    if (tgt[si * B + bi] != tok[si * B + bi] + 1 || tgt[si * B + bi] >= 900) inside = 0;
                }
            // micro-batches of 4 (samples 0-3 and 4-7) see the same windows
            for (int half = 0; half < 2; half++) {
                dataset_train_batch(&ds, S, 4, (DataOrder)order, 42, step, (uint32_t)(4 * half), B, tok4, tgt4);
                for (int bi = 0; bi < 4; bi++)
                    for (int si = 0; si < S; si++)
                        if (tok4[si * 4 + bi] != tok[si * B + 4 * half + bi]) consistent = 0;
            }
        }
        CHECK(inside, "order %d: a window leaves the training split or targets are not shifted", order);
        CHECK(consistent, "order %d: micro-batching changes the windows", order);
    }
    dataset_free(&ds);
    return check_summary();
}
