// Vocabulary-parallel embedding and cross-entropy (backend/cpu/vocab_parallel.h), t ranks simulated in one
// process: the sum of the ranks' lookups is the embedding bit for bit; the combined loss and each
// rank's gradient columns equal the one-process cross-entropy; padded columns (v = 37 over t = 3
// ranks of 13) are ignored whatever they hold and get zero gradient.
#include <math.h>
#include <string.h>
#include "check.h"
#include "backend/cpu/crossentropy.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/vocab_parallel.h"
#include "util/common.h"
#include "util/philox.h"

static float uniform(uint32_t i) {
    philox_ctr c = {{i, 0, 0, 0}};
    return (float)philox4x32_10(c, philox_key_from_seed(5)).v[0] / 4294967296.0f * 8.0f - 4.0f;
}

int main(void) {
    enum { N = 24, V = 37, T = 3, VL = 13, H = 8, S = 6, B = 4 };
    float *logits = xmalloc(sizeof(float) * N * V), *grad = xmalloc(sizeof(float) * N * V);
    float *row_loss = xmalloc(sizeof(float) * N), *lse = xmalloc(sizeof(float) * N);
    float parts[T * N * 3], local[T][N * VL];
    int32_t targets[N];
    for (int i = 0; i < N * V; i++) logits[i] = uniform((uint32_t)i);
    for (int r = 0; r < N; r++) targets[r] = (r * 7 + 3) % V;
    memcpy(grad, logits, sizeof(float) * N * V);
    double want = crossentropy_forward_backward(grad, targets, row_loss, N, V, 0.5f);

    for (int q = 0; q < T; q++)
        for (int r = 0; r < N; r++)
            for (int c = 0; c < VL; c++) {
                int col = q * VL + c;
                local[q][r * VL + c] = col < V ? logits[r * V + col] : 1e30f;   // padding: must not count
            }
    for (int q = 0; q < T; q++) crossentropy_vocab_partial(parts + q * N * 3, local[q], targets, N, VL, q * VL, V);
    double got = crossentropy_vocab_combine(lse, row_loss, parts, T, N);
    CHECK(fabs(got - want) <= 1e-5 * fabs(want), "vocabulary-parallel loss %.9g, one process %.9g", got, want);
    double worst = 0.0;
    int pad_zero = 1;
    for (int q = 0; q < T; q++) {
        crossentropy_vocab_backward(local[q], lse, targets, N, VL, q * VL, V, 0.5f);
        for (int r = 0; r < N; r++)
            for (int c = 0; c < VL; c++) {
                int col = q * VL + c;
                if (col >= V) { pad_zero &= local[q][r * VL + c] == 0.0f; continue; }
                double d = fabs((double)local[q][r * VL + c] - grad[r * V + col]);
                if (d > worst) worst = d;
            }
    }
    CHECK(worst < 1e-6, "gradient differs from the one-process cross-entropy by %.3g", worst);
    CHECK(pad_zero, "padded vocabulary columns got a gradient");

    // Embedding: the ranks' lookups sum to wte[token]; + positions == embedding_forward exactly.
    float wte[V * H], wpe[S * H], x[S * B * H], sum[S * B * H], part[S * B * H];
    int32_t tokens[S * B];
    for (int i = 0; i < V * H; i++) wte[i] = uniform(1000u + (uint32_t)i);
    for (int i = 0; i < S * H; i++) wpe[i] = uniform(5000u + (uint32_t)i);
    for (int i = 0; i < S * B; i++) tokens[i] = (i * 11 + 5) % V;
    embedding_forward(x, tokens, wte, wpe, S, B, H);
    memset(sum, 0, sizeof sum);
    float wte_local[VL * H];
    for (int q = 0; q < T; q++) {
        memset(wte_local, 0, sizeof wte_local);
        for (int r = 0; r < VL && q * VL + r < V; r++) memcpy(wte_local + r * H, wte + (q * VL + r) * H, sizeof(float) * H);
        embedding_vocab_forward(part, tokens, wte_local, q * VL, VL, S * B, H);
        for (int i = 0; i < S * B * H; i++) sum[i] += part[i];
    }
    // The second half of the positions, as an SP rank holding s0 = 3 adds them.
    embedding_add_positions(sum, wpe, 0, 3, B, H);
    embedding_add_positions(sum + 3 * B * H, wpe, 3, 3, B, H);
    CHECK(memcmp(sum, x, sizeof x) == 0, "vocabulary-parallel embedding differs from the one-process one");

    // Backward: each rank's rows of dwte and the positions' rows match the one-process gradient.
    float dwte[V * H] = {0}, dwpe[S * H] = {0}, dpos[S * H] = {0}, dlocal[VL * H];
    embedding_backward(dwte, dwpe, x, tokens, S, B, H);
    embedding_positions_backward(dpos, x, 0, 3, B, H);
    embedding_positions_backward(dpos, x + 3 * B * H, 3, 3, B, H);
    CHECK(memcmp(dpos, dwpe, sizeof dpos) == 0, "position-embedding gradient differs");
    int rows_ok = 1;
    for (int q = 0; q < T; q++) {
        memset(dlocal, 0, sizeof dlocal);
        embedding_vocab_backward(dlocal, x, tokens, q * VL, VL, S * B, H);
        for (int r = 0; r < VL; r++) {
            int row = q * VL + r;
            for (int c = 0; c < H; c++)
                if (dlocal[r * H + c] != (row < V ? dwte[row * H + c] : 0.0f)) rows_ok = 0;
        }
    }
    CHECK(rows_ok, "a rank's token-embedding gradient rows differ from the one-process gradient");
    free(logits); free(grad); free(row_loss); free(lse);
    return check_summary();
}
