#include "model/policy.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory/act_names.h"
#include "util/common.h"

const char *recompute_name(LayerRecompute k) {
    return k == RECOMPUTE_SELECTIVE ? "selective" : k == RECOMPUTE_FULL ? "full" : k == RECOMPUTE_MEMO ? "memo" : "none";
}
const char *mask_mode_name(MaskMode m) { return m == MASKS_BITS ? "bits" : m == MASKS_REGEN ? "regen" : "bytes"; }
const char *act_dtype_name(ActDtype d) { return d == ACT_BF16 ? "bf16" : "fp32"; }

static void alloc_plan(MemoryPolicy *p, int layers) {
    p->layers = layers;
    p->kind = xcalloc(sizeof(LayerRecompute) * (size_t)layers);
    p->group_start = xcalloc(sizeof(int) * (size_t)layers);
    p->alpha = xcalloc(sizeof(float) * (size_t)layers);
    for (int l = 0; l < layers; l++) {
        p->group_start[l] = l;
        p->alpha[l] = -1.0f;
    }
}

int policy_memo_mixed(const MemoryPolicy *p) {
    for (int l = 0; p && p->alpha && l < p->layers; l++)
        if (p->kind[l] == RECOMPUTE_MEMO && p->alpha[l] >= 0.0f) return 1;
    return 0;
}

void policy_default(MemoryPolicy *p, int layers) {
    memset(p, 0, sizeof *p);
    alloc_plan(p, layers);
}

void policy_copy(MemoryPolicy *dst, const MemoryPolicy *src) {
    policy_default(dst, src->layers);
    LayerRecompute *kind = dst->kind;
    int *group_start = dst->group_start;
    float *alpha = dst->alpha;
    *dst = *src;
    dst->kind = kind;
    dst->group_start = group_start;
    dst->alpha = alpha;
    memcpy(dst->kind, src->kind, sizeof(LayerRecompute) * (size_t)src->layers);
    memcpy(dst->group_start, src->group_start, sizeof(int) * (size_t)src->layers);
    if (src->alpha) memcpy(dst->alpha, src->alpha, sizeof(float) * (size_t)src->layers);
}

void policy_keep_everything(MemoryPolicy *all, const MemoryPolicy *plan) {
    policy_copy(all, plan);
    for (int l = 0; l < plan->layers; l++) {
        all->kind[l] = RECOMPUTE_NONE;
        all->group_start[l] = l;
    }
}

void policy_cut_groups(MemoryPolicy *p, int chunk_layers) {
    for (int l = 0; chunk_layers > 0 && l < p->layers; l++) {
        int chunk0 = l / chunk_layers * chunk_layers;
        if (p->group_start[l] < chunk0) p->group_start[l] = chunk0;
    }
}

void policy_free(MemoryPolicy *p) {
    free(p->kind);
    free(p->group_start);
    free(p->alpha);
    memset(p, 0, sizeof *p);
}

int policy_parse_masks(const char *text, MaskMode *out) {
    if (strcmp(text, "bytes") == 0) *out = MASKS_BYTES;
    else if (strcmp(text, "bits") == 0) *out = MASKS_BITS;
    else if (strcmp(text, "regen") == 0) *out = MASKS_REGEN;
    else return -1;
    return 0;
}

int policy_parse_dtype(const char *text, ActDtype *out) {
    if (strcmp(text, "fp32") == 0) *out = ACT_FP32;
    else if (strcmp(text, "bf16") == 0) *out = ACT_BF16;
    else return -1;
    return 0;
}

static int parse_kind(const char *text, size_t len, LayerRecompute *out) {
    const char *names[] = {"none", "selective", "full", "memo"};
    for (int k = 0; k < 4; k++)
        if (strlen(names[k]) == len && strncmp(text, names[k], len) == 0) { *out = (LayerRecompute)k; return 0; }
    return -1;
}

// "memo@ALPHA": a memo layer's own α. Returns 0 with *alpha (-1 without '@'), -1 when malformed (err set
// only when the number reads but lies outside [0, 1]).
static int parse_kind_alpha(const char *text, size_t len, LayerRecompute *kind, float *alpha, char *err, size_t errlen) {
    const char *at = memchr(text, '@', len);
    *alpha = -1.0f;
    if (parse_kind(text, at ? (size_t)(at - text) : len, kind) != 0) return -1;
    if (!at) return 0;
    if (*kind != RECOMPUTE_MEMO) return -1;
    char num[48];
    size_t n = len - (size_t)(at + 1 - text);
    if (n == 0 || n >= sizeof num) return -1;
    memcpy(num, at + 1, n);
    num[n] = '\0';
    char *q;
    errno = 0;
    double a = strtod(num, &q);
    if (q == num || *q || errno || !(a == a)) return -1;
    if (a < 0.0 || a > 1.0) {
        snprintf(err, errlen, "--recompute-layers: memo α %s is not in [0, 1] (the fraction of the layer's tokens "
                 "swapped to host memory)", num);
        return -1;
    }
    *alpha = (float)a;
    return 0;
}

static int parse_layer_list(MemoryPolicy *p, const char *list, char *err, size_t errlen) {
    int L = p->layers;
    int *seen = xcalloc(sizeof(int) * (size_t)L);
    const char *s = list;
    int rc = 0;
    while (*s && rc == 0) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', len);
        char *q;
        long lo, hi;
        LayerRecompute kind;
        float alpha = -1.0f;
        errno = 0;
        err[0] = '\0';
        lo = strtol(s, &q, 10);
        hi = lo;
        if (!colon || q == s || errno) rc = -1;
        else if (*q == '-') { const char *r = q + 1; hi = strtol(r, &q, 10); if (q == r) rc = -1; }
        if (rc == 0 && q != colon) rc = -1;
        if (rc == 0 && parse_kind_alpha(colon + 1, len - (size_t)(colon + 1 - s), &kind, &alpha, err, errlen) != 0)
            rc = -1;
        if (rc) {
            if (!err[0])
                snprintf(err, errlen, "--recompute-layers: cannot parse '%.*s' (expected "
                         "FIRST[-LAST]:none|selective|full|memo[@ALPHA])", (int)(len < 80 ? len : 80), s);
            break;
        }
        if (lo < 0 || hi >= L || lo > hi) {
            snprintf(err, errlen, "--recompute-layers: range %ld-%ld is outside layers 0-%d", lo, hi, L - 1);
            rc = -1;
            break;
        }
        for (long l = lo; l <= hi; l++) {
            if (seen[l]) {
                snprintf(err, errlen, "--recompute-layers: layer %ld is listed twice", l);
                rc = -1;
                break;
            }
            seen[l] = 1;
            p->kind[l] = kind;
            p->alpha[l] = alpha;
        }
        s = end ? end + 1 : s + len;
    }
    for (int l = 0; l < L && rc == 0; l++)
        if (!seen[l]) {
            snprintf(err, errlen, "--recompute-layers: layer %d is not covered (the list must name every layer 0-%d)",
                     l, L - 1);
            rc = -1;
        }
    free(seen);
    return rc;
}

int policy_build(MemoryPolicy *p, int layers, const char *recompute, const char *method, int num_layers,
                 const char *layer_list, char *err, size_t errlen) {
    // Everything but the per-layer plan comes in set (precision, device, masks, Tempo, offload, ...):
    // kept whole, so that a field added later is not dropped here.
    MemoryPolicy given = *p;
    given.layers = 0;
    given.kind = NULL;
    given.group_start = NULL;
    given.alpha = NULL;
    *p = given;
    alloc_plan(p, layers);
    if (layer_list) return parse_layer_list(p, layer_list, err, errlen);
    LayerRecompute kind;
    if (!recompute || parse_kind(recompute, strlen(recompute), &kind) != 0) {
        snprintf(err, errlen, "--recompute: unknown policy '%s' (expected none, selective or full)",
                 recompute ? recompute : "");
        return -1;
    }
    if (kind != RECOMPUTE_FULL) {
        for (int l = 0; l < layers; l++) p->kind[l] = kind;
        return 0;
    }
    int uniform = !method || strcmp(method, "uniform") == 0;
    if (!uniform && strcmp(method, "block") != 0) {
        snprintf(err, errlen, "--recompute-method: unknown method '%s' (expected uniform or block)", method);
        return -1;
    }
    if (num_layers < 1 || num_layers > layers) {
        snprintf(err, errlen, "--recompute-num-layers %d must be between 1 and the layer count %d", num_layers, layers);
        return -1;
    }
    for (int l = 0; l < layers; l++) {
        if (uniform) {                       // groups of N layers, each storing only its input
            p->kind[l] = RECOMPUTE_FULL;
            p->group_start[l] = l / num_layers * num_layers;
        } else {                             // the first N layers recomputed one by one, the rest stored
            p->kind[l] = l < num_layers ? RECOMPUTE_FULL : RECOMPUTE_NONE;
        }
    }
    return 0;
}

int policy_memo_needs_alpha(const MemoryPolicy *p) {
    for (int l = 0; p && l < p->layers; l++)
        if (p->kind[l] == RECOMPUTE_MEMO && !(p->alpha && p->alpha[l] >= 0.0f)) return 1;
    return 0;
}

int policy_list_has_memo(const char *list) { return list && strstr(list, ":memo") != NULL; }

const char *policy_alpha_text(float a, char *buf, size_t len) {
    for (int digits = 6; digits <= 9; digits++) {   // the shortest that reads back as a: --recompute-layers takes it
        snprintf(buf, len, "%.*g", digits, (double)a);
        if (strtof(buf, NULL) == a) break;
    }
    return buf;
}

static float own_alpha(const MemoryPolicy *p, int l) {
    return p->alpha && p->kind[l] == RECOMPUTE_MEMO ? p->alpha[l] : -1.0f;
}

void policy_describe(const MemoryPolicy *p, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int l = 0; l < p->layers && used < len;) {
        int r = l;
        while (r + 1 < p->layers && p->kind[r + 1] == p->kind[l] && own_alpha(p, r + 1) == own_alpha(p, l)) r++;
        int all = l == 0 && r == p->layers - 1;   // one policy for every layer: just its name
        int n = all ? snprintf(buf, len, "%s", recompute_name(p->kind[l]))
                : l == r ? snprintf(buf + used, len - used, "%s%d:%s", used ? "," : "", l, recompute_name(p->kind[l]))
                         : snprintf(buf + used, len - used, "%s%d-%d:%s", used ? "," : "", l, r, recompute_name(p->kind[l]));
        if (n < 0) break;
        used += (size_t)n;
        if (own_alpha(p, l) >= 0.0f && used < len) {
            n = snprintf(buf + used, len - used, "@%s", policy_alpha_text(own_alpha(p, l), (char[24]){0}, 24));
            if (n > 0) used += (size_t)n;
        }
        if (p->kind[l] == RECOMPUTE_FULL) {
            int groups = 0;
            for (int k = l; k <= r; k++) groups += p->group_start[k] == k;
            if (groups != r - l + 1 && used < len) {
                n = snprintf(buf + used, len - used, "(groups of %d)", p->layers > 0 ? (r - l + 1) / groups : 0);
                if (n > 0) used += (size_t)n;
            }
        }
        l = r + 1;
    }
    static const struct { unsigned bit; const char *name; } parts[] = {   // the fusion search's (policy.h)
        {RECOMPUTE_NORM_OUT, "norm"}, {RECOMPUTE_ACT_OUT, "act"}, {RECOMPUTE_ATTN_OUT, "attn"},
        {RECOMPUTE_QKV_OUT, "qkv"}, {RECOMPUTE_FC1_OUT, "fc1"}, {RECOMPUTE_PROJ_OUT, "proj"},
        {RECOMPUTE_ATTN_MASK, "attn_mask"}, {RECOMPUTE_DROP1_MASK, "drop1_mask"}, {RECOMPUTE_DROP2_MASK, "drop2_mask"}};
    for (size_t i = 0, first = 1; i < sizeof parts / sizeof parts[0]; i++) {
        size_t at = strlen(buf);
        if (!(p->tempo & parts[i].bit) || at >= len) continue;
        snprintf(buf + at, len - at, "%s%s", first ? "+" : ",", parts[i].name);
        first = 0;
    }
}

int policy_parse_tempo(const char *text, unsigned *out, char *err, size_t errlen) {
    static const struct { const char *name; unsigned bit; } parts[] = {
        {"gelu", TEMPO_GELU}, {"layernorm", TEMPO_LAYERNORM}, {"softmax", TEMPO_SOFTMAX},
        {"all", TEMPO_GELU | TEMPO_LAYERNORM | TEMPO_SOFTMAX}, {"none", 0}};
    unsigned bits = 0;
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int found = 0;
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
            if (strlen(parts[i].name) == len && strncmp(parts[i].name, p, len) == 0) {
                bits |= parts[i].bit;
                found = 1;
            }
        if (!found) {
            snprintf(err, errlen, "--tempo: unknown part '%.*s' (expected gelu, layernorm, softmax, all or none, "
                     "comma-separated)", (int)(len < 40 ? len : 40), p);
            return -1;
        }
        p += len;
        if (*p == ',') p++;
    }
    *out = bits;
    return 0;
}

const char *tempo_describe(unsigned tempo, char *buf, size_t len) {
    tempo &= TEMPO_GELU | TEMPO_LAYERNORM | TEMPO_SOFTMAX;   // Few-Bit and mini-seq are reported apart
    snprintf(buf, len, "%s%s%s%s", tempo & TEMPO_GELU ? "gelu," : "", tempo & TEMPO_LAYERNORM ? "layernorm," : "",
             tempo & TEMPO_SOFTMAX ? "softmax," : "", tempo ? "" : "none");
    size_t n = strlen(buf);
    if (n && buf[n - 1] == ',') buf[n - 1] = '\0';
    return buf;
}

int policy_parse_offload(const char *text, unsigned *out, char *err, size_t errlen) {
    unsigned bits = 0;
    const char *p = text;
    if (strcmp(text, "none") == 0 || !*text) p = "";
    if (strcmp(text, "all") == 0) {
        *out = (1u << ACT_N_OFFLOADABLE) - 1;
        return 0;
    }
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int found = -1;
        for (int n = 0; n < ACT_N_OFFLOADABLE; n++)
            if (strlen(act_name_str((ActName)n)) == len && strncmp(act_name_str((ActName)n), p, len) == 0) found = n;
        if (found < 0) {
            snprintf(err, errlen, "--offload: '%.*s' is not a per-layer tensor (expected names such as ln1_in, qkv_in, "
                     "q, k, v, attn_prob, attn_mask, fc1_in, gelu_in, fc2_in; all or none; comma-separated)",
                     (int)(len < 40 ? len : 40), p);
            return -1;
        }
        bits |= 1u << found;
        p += len;
        if (*p == ',') p++;
    }
    *out = bits;
    return 0;
}

const char *offload_describe(unsigned offload, char *buf, size_t len) {
    size_t k = 0;
    buf[0] = '\0';
    if (offload == (1u << ACT_N_OFFLOADABLE) - 1) {
        snprintf(buf, len, "all");
        return buf;
    }
    for (int n = 0; n < ACT_N_OFFLOADABLE && k + 1 < len; n++)
        if (offload >> n & 1) {
            int w = snprintf(buf + k, len - k, "%s%s", k ? "," : "", act_name_str((ActName)n));
            if (w < 0 || (size_t)w >= len - k) break;
            k += (size_t)w;
        }
    if (!offload) snprintf(buf, len, "none");
    return buf;
}
