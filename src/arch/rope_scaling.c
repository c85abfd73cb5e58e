#include "arch/rope_scaling.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const TYPE_NAMES[] = {"default", "linear", "llama3"};   // indexed by RopeType

const char *rope_type_name(int type) { return type == ROPE_LINEAR || type == ROPE_LLAMA3 ? TYPE_NAMES[type] : TYPE_NAMES[0]; }

int rope_type_from_name(const char *name) {
    for (int t = 0; t < (int)(sizeof TYPE_NAMES / sizeof TYPE_NAMES[0]); t++)
        if (!strcmp(name, TYPE_NAMES[t])) return t;
    return -1;
}

const char *rope_scaling_text(const RopeScaling *sc, char *out, size_t len) {
    if (sc->type == ROPE_LINEAR) snprintf(out, len, "linear:%.9g", (double)sc->factor);
    else if (sc->type == ROPE_LLAMA3)
        snprintf(out, len, "llama3:%.9g:%.9g:%.9g:%d", (double)sc->factor, (double)sc->low_freq_factor,
                 (double)sc->high_freq_factor, sc->original_max_positions);
    else snprintf(out, len, "none");
    return out;
}

int rope_scaling_check(const RopeScaling *sc, char *err, size_t errlen) {
    if (sc->type == ROPE_PLAIN) return 0;
    if (sc->type != ROPE_LINEAR && sc->type != ROPE_LLAMA3) {
        snprintf(err, errlen, "RoPE scaling type %d: expected linear or llama3", sc->type);
        return -1;
    }
    if (!(sc->factor >= 1.0f && sc->factor <= 1e6f)) {
        snprintf(err, errlen, "RoPE scaling factor %g: expected 1 .. 1e6", (double)sc->factor);
        return -1;
    }
    if (sc->type == ROPE_LINEAR) return 0;
    if (!(sc->low_freq_factor > 0.0f && sc->low_freq_factor <= 1e6f)) {
        snprintf(err, errlen, "RoPE low_freq_factor %g: expected above 0 (and at most 1e6)", (double)sc->low_freq_factor);
        return -1;
    }
    if (!(sc->high_freq_factor > sc->low_freq_factor && sc->high_freq_factor <= 1e6f)) {
        snprintf(err, errlen, "RoPE high_freq_factor %g: expected above low_freq_factor %g (and at most 1e6)",
                 (double)sc->high_freq_factor, (double)sc->low_freq_factor);
        return -1;
    }
    if (sc->original_max_positions < 1) {
        snprintf(err, errlen, "RoPE original_max_position_embeddings %d: expected a positive count",
                 sc->original_max_positions);
        return -1;
    }
    return 0;
}

// One ':'-separated number of text at *p (advanced past it and its separator).
static int scaling_number(const char **p, double *x) {
    char *end;
    errno = 0;
    *x = strtod(*p, &end);
    if (end == *p || errno || !isfinite(*x) || (*end != ':' && *end != '\0')) return -1;
    *p = *end ? end + 1 : end;
    return 0;
}

int rope_scaling_parse(const char *text, RopeScaling *sc, char *err, size_t errlen) {
    RopeScaling r = {0};
    double v[4] = {0};
    int want = 0;
    const char *p = text;
    if (!strcmp(text, "none") || !strcmp(text, "default")) {
        *sc = r;
        return 0;
    }
    if (!strncmp(text, "linear:", 7)) r.type = ROPE_LINEAR, want = 1, p += 7;
    else if (!strncmp(text, "llama3:", 7)) r.type = ROPE_LLAMA3, want = 4, p += 7;
    else {
        snprintf(err, errlen, "'%s': expected none, linear:FACTOR or llama3:FACTOR:LOW:HIGH:ORIGINAL_POSITIONS", text);
        return -1;
    }
    for (int i = 0; i < want; i++)
        if (scaling_number(&p, &v[i]) || (i == want - 1) != (*p == '\0')) {
            snprintf(err, errlen, "'%s': expected %s", text,
                     want == 1 ? "linear:FACTOR" : "llama3:FACTOR:LOW:HIGH:ORIGINAL_POSITIONS (four numbers)");
            return -1;
        }
    r.factor = (float)v[0];
    r.low_freq_factor = (float)v[1];
    r.high_freq_factor = (float)v[2];
    if (want == 4 && (v[3] != floor(v[3]) || v[3] < 1 || v[3] > 2147483647.0)) {
        snprintf(err, errlen, "'%s': the original positions %g are not a positive integer", text, v[3]);
        return -1;
    }
    r.original_max_positions = (int)v[3];
    char why[160];
    if (rope_scaling_check(&r, why, sizeof why)) {
        snprintf(err, errlen, "'%s': %s", text, why);
        return -1;
    }
    *sc = r;
    return 0;
}
