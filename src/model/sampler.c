#include "model/sampler.h"
#include <math.h>
#include <stdlib.h>
#include "util/common.h"

void sampler_init(Sampler *s, int vocab, float temperature, int top_k, uint64_t seed) {
    s->temperature = temperature;
    s->top_k = top_k > 0 && top_k < vocab ? top_k : 0;
    s->key = philox_key_from_seed(seed);
    s->vocab = vocab;
    s->cand = xmalloc((size_t)vocab * sizeof(int));
    s->prob = xmalloc((size_t)vocab * sizeof(double));
}

void sampler_free(Sampler *s) {
    free(s->cand);
    free(s->prob);
    s->cand = NULL;
    s->prob = NULL;
}

// a ranks above b: larger logit, then lower id.
static int above(const float *z, int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); }

// Min-heap order on rank: the worst candidate sits at hp[0].
static void sift_down(const float *z, int *hp, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && above(z, hp[w], hp[l])) w = l;
        if (r < n && above(z, hp[w], hp[r])) w = r;
        if (w == i) return;
        int t = hp[i]; hp[i] = hp[w]; hp[w] = t;
        i = w;
    }
}

// The k best ids of z, best first, in O(v log k): keep the k best seen in a heap whose top is the
// worst of them, then sort the heap by moving the worst to the back.
static void top_k(const float *z, int v, int k, int *out) {
    for (int i = 0; i < k; i++) out[i] = i;
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(z, out, k, i);
    for (int id = k; id < v; id++)
        if (above(z, id, out[0])) { out[0] = id; sift_down(z, out, k, 0); }
    for (int end = k - 1; end > 0; end--) {
        int t = out[0]; out[0] = out[end]; out[end] = t;
        sift_down(z, out, end, 0);
    }
}

int32_t sampler_draw(Sampler *s, const float *z, uint32_t index) {
    int v = s->vocab;
    if (s->temperature <= 0.0f || s->top_k == 1) {
        int best = 0;
        for (int id = 1; id < v; id++) if (above(z, id, best)) best = id;
        return best;
    }
    int n = s->top_k ? s->top_k : v;
    if (s->top_k) top_k(z, v, n, s->cand);
    else for (int id = 0; id < v; id++) s->cand[id] = id;
    double mx = -INFINITY, sum = 0.0, t = s->temperature;
    for (int i = 0; i < n; i++) mx = z[s->cand[i]] > mx ? z[s->cand[i]] : mx;
    for (int i = 0; i < n; i++) { s->prob[i] = exp(((double)z[s->cand[i]] - mx) / t); sum += s->prob[i]; }
    // 53 random bits: u uniform in [0, 1).
    philox_ctr ctr = {{index, 0, 0, (uint32_t)PHILOX_SAMPLE << 24}};
    philox_ctr r = philox4x32_10(ctr, s->key);
    double u = ((double)(r.v[0] >> 5) * 67108864.0 + (double)(r.v[1] >> 6)) / 9007199254740992.0;
    double target = u * sum, acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->prob[i];
        if (target < acc) return s->cand[i];
    }
    return s->cand[n - 1];   // rounding left target at the very top
}
