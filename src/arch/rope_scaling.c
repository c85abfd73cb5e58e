#include "arch/rope_scaling.h"
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const TYPE_NAMES[] = {"default", "linear", "llama3", "longrope", "yarn", "dynamic"};   // by RopeType

const char *rope_type_name(int type) {
    return type >= ROPE_LINEAR && type <= ROPE_DYNAMIC ? TYPE_NAMES[type] : TYPE_NAMES[0];
}

// transformers' get_mscale(scale, mscale=1): 1 for a scale up to 1, else 0.1·mscale·ln(scale) + 1
static double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0; }

double yarn_attention_factor(double factor, double mscale, double mscale_all_dim) {
    if (mscale != 0.0 && mscale_all_dim != 0.0)
        return yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim);
    return yarn_mscale(factor, 1.0);
}

RopeScaling yarn_defaults(double factor, int original_max_positions) {
    RopeScaling r = {0};
    r.type = ROPE_YARN;
    r.factor = (float)factor;
    r.original_max_positions = original_max_positions;
    r.attention_factor = yarn_attention_factor(factor, 0.0, 0.0);   // from the number given, as transformers'

    r.beta_fast = 32.0f;
    r.beta_slow = 1.0f;
    r.truncate = 1;
    return r;
}

int rope_type_from_name(const char *name) {
    for (int t = 0; t < (int)(sizeof TYPE_NAMES / sizeof TYPE_NAMES[0]); t++)
        if (!strcmp(name, TYPE_NAMES[t])) return t;
    return -1;
}

// ",x0,x1,…" of n floats (round-tripping) at out + k; returns the new k.
static size_t factor_list(char *out, size_t len, size_t k, const float *x, int n) {
    for (int i = 0; i < n && k < len; i++) k += (size_t)snprintf(out + k, len - k, "%s%.9g", i ? "," : "", (double)x[i]);
    return k;
}

const char *rope_scaling_text(const RopeScaling *sc, char *out, size_t len) {
    if (sc->type == ROPE_LONGROPE) {
        size_t k = (size_t)snprintf(out, len, "longrope:%d:%.17g:", sc->original_max_positions, sc->attention_factor);
        k = factor_list(out, len, k, sc->short_factor, sc->n_factors);
        if (k < len) k += (size_t)snprintf(out + k, len - k, ":");
        factor_list(out, len, k, sc->long_factor, sc->n_factors);
    } else if (sc->type == ROPE_LINEAR) snprintf(out, len, "linear:%.9g", (double)sc->factor);
    else if (sc->type == ROPE_LLAMA3)
        snprintf(out, len, "llama3:%.9g:%.9g:%.9g:%d", (double)sc->factor, (double)sc->low_freq_factor,
                 (double)sc->high_freq_factor, sc->original_max_positions);
    else if (sc->type == ROPE_DYNAMIC)
        snprintf(out, len, "dynamic:%.9g:%d", (double)sc->factor, sc->original_max_positions);
    else if (sc->type == ROPE_YARN)
        snprintf(out, len, "yarn:%.9g:%d:%.17g:%.9g:%.9g:%d", (double)sc->factor, sc->original_max_positions,
                 sc->attention_factor, (double)sc->beta_fast, (double)sc->beta_slow, sc->truncate);
    else snprintf(out, len, "none");
    return out;
}

const char *rope_scaling_label(const RopeScaling *sc, char *out, size_t len) {
    if (sc->type != ROPE_LONGROPE) return rope_scaling_text(sc, out, len);
    snprintf(out, len, "longrope (%d factors, original %d positions, attention %.6g)", sc->n_factors,
             sc->original_max_positions, sc->attention_factor);
    return out;
}

const char *rope_scaling_key(const RopeScaling *sc, char *out, size_t len) {
    if (sc->type != ROPE_LONGROPE) return rope_scaling_text(sc, out, len);
    uint64_t h = 1469598103934665603ull;   // FNV-1a over the factors' bytes
    const unsigned char *bytes[2] = {(const unsigned char *)sc->short_factor, (const unsigned char *)sc->long_factor};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < (size_t)sc->n_factors * sizeof(float); i++) h = (h ^ bytes[k][i]) * 1099511628211ull;
    snprintf(out, len, "longrope:%d:%.17g:%d factors #%016llx", sc->original_max_positions, sc->attention_factor,
             sc->n_factors, (unsigned long long)h);
    return out;
}

static int longrope_check(const RopeScaling *sc, char *err, size_t errlen) {
    if (sc->n_factors < 1 || sc->n_factors > ROPE_MAX_FACTORS) {
        snprintf(err, errlen, "longrope with %d factors: expected 1 .. %d (one per frequency, d/2)", sc->n_factors,
                 ROPE_MAX_FACTORS);
        return -1;
    }
    if (!(sc->attention_factor > 0.0 && sc->attention_factor <= 1e3)) {
        snprintf(err, errlen, "longrope attention_factor %g: expected above 0 (and at most 1e3)", sc->attention_factor);
        return -1;
    }
    for (int i = 0; i < sc->n_factors; i++)
        if (!(sc->short_factor[i] > 0.0f && sc->short_factor[i] <= 1e6f) ||
            !(sc->long_factor[i] > 0.0f && sc->long_factor[i] <= 1e6f)) {
            snprintf(err, errlen, "longrope factor %d (short %g, long %g): expected above 0 (and at most 1e6)", i,
                     (double)sc->short_factor[i], (double)sc->long_factor[i]);
            return -1;
        }
    return 0;
}

static int yarn_check(const RopeScaling *sc, char *err, size_t errlen) {
    if (!(sc->attention_factor > 0.0 && sc->attention_factor <= 1e3)) {
        snprintf(err, errlen, "yarn attention_factor %g: expected above 0 (and at most 1e3)", sc->attention_factor);
        return -1;
    }
    if (!(sc->beta_fast > 0.0f && sc->beta_fast <= 1e6f) || !(sc->beta_slow > 0.0f && sc->beta_slow <= 1e6f)) {
        snprintf(err, errlen, "yarn beta_fast %g, beta_slow %g: expected each above 0 (and at most 1e6)",
                 (double)sc->beta_fast, (double)sc->beta_slow);
        return -1;
    }
    if (sc->truncate != 0 && sc->truncate != 1) {
        snprintf(err, errlen, "yarn truncate %d: expected 0 or 1", sc->truncate);
        return -1;
    }
    return 0;
}

int rope_scaling_check(const RopeScaling *sc, char *err, size_t errlen) {
    if (sc->type == ROPE_PLAIN) return 0;
    if (sc->type < ROPE_LINEAR || sc->type > ROPE_DYNAMIC) {
        snprintf(err, errlen, "RoPE scaling type %d: expected linear, llama3, longrope, yarn or dynamic", sc->type);
        return -1;
    }
    if (sc->type == ROPE_LONGROPE) {
        if (sc->original_max_positions < 1) {
            snprintf(err, errlen, "RoPE original_max_position_embeddings %d: expected a positive count",
                     sc->original_max_positions);
            return -1;
        }
        return longrope_check(sc, err, errlen);
    }
    if (!(sc->factor >= 1.0f && sc->factor <= 1e6f)) {
        snprintf(err, errlen, "RoPE scaling factor %g: expected 1 .. 1e6", (double)sc->factor);
        return -1;
    }
    if (sc->type == ROPE_LINEAR) return 0;
    if (sc->type == ROPE_YARN || sc->type == ROPE_DYNAMIC) {
        if (sc->original_max_positions < 1) {
            snprintf(err, errlen, "RoPE original_max_position_embeddings %d: expected a positive count",
                     sc->original_max_positions);
            return -1;
        }
        return sc->type == ROPE_YARN ? yarn_check(sc, err, errlen) : 0;
    }
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

// n comma-separated floats of text at *p, ended by ':' (skipped) or the end; their count, -1 if malformed.
static int factor_numbers(const char **p, float *x, int most) {
    int n = 0;
    while (1) {
        char *end;
        errno = 0;
        double v = strtod(*p, &end);
        if (end == *p || errno || !isfinite(v) || n == most) return -1;
        x[n++] = (float)v;
        *p = end;
        if (**p != ',') break;
        (*p)++;
    }
    if (**p == ':') (*p)++;
    else if (**p) return -1;
    return n;
}

// The parsed scaling r, checked against its ranges, into *sc; or -1 with the text and why in err.
static int store_checked(const char *text, const RopeScaling *r, RopeScaling *sc, char *err, size_t errlen) {
    char why[160];
    if (rope_scaling_check(r, why, sizeof why)) {
        snprintf(err, errlen, "'%.120s%s': %s", text, strlen(text) > 120 ? "..." : "", why);
        return -1;
    }
    *sc = *r;
    return 0;
}

// "longrope:ORIG:ATTENTION:S0,…:L0,…" after its "longrope:".
static int parse_longrope(const char *text, const char *p, RopeScaling *sc, char *err, size_t errlen) {
    RopeScaling r = {0};
    r.type = ROPE_LONGROPE;
    double orig, att;
    int ns = -2, nl = -2;
    if (scaling_number(&p, &orig) || scaling_number(&p, &att) || (ns = factor_numbers(&p, r.short_factor, ROPE_MAX_FACTORS)) < 0 ||
        *p == '\0' || (nl = factor_numbers(&p, r.long_factor, ROPE_MAX_FACTORS)) < 0 || *p != '\0' || ns != nl ||
        orig != floor(orig) || orig < 1 || orig > 2147483647.0) {
        snprintf(err, errlen, "'%.80s%s': expected longrope:ORIGINAL_POSITIONS:ATTENTION_FACTOR:SHORT,...:LONG,... "
                 "(as many long factors as short, at most %d)", text, strlen(text) > 80 ? "..." : "", ROPE_MAX_FACTORS);
        return -1;
    }
    r.original_max_positions = (int)orig;
    r.attention_factor = att;
    r.n_factors = ns;
    return store_checked(text, &r, sc, err, errlen);
}

// "yarn:F:ORIG" or "yarn:F:ORIG:ATTENTION:BETA_FAST:BETA_SLOW:TRUNCATE" after its "yarn:".
static int parse_yarn(const char *text, const char *p, RopeScaling *sc, char *err, size_t errlen) {
    double v[6] = {0};
    int n = 0;
    while (n < 6 && *p) {
        if (scaling_number(&p, &v[n])) { n = -1; break; }
        n++;
    }
    if ((n != 2 && n != 6) || *p || p[-1] == ':' || v[1] != floor(v[1]) || v[1] < 1 || v[1] > 2147483647.0 ||
        (n == 6 && v[5] != 0.0 && v[5] != 1.0)) {
        snprintf(err, errlen, "'%.120s': expected yarn:FACTOR:ORIGINAL_POSITIONS or yarn:FACTOR:ORIGINAL_POSITIONS:"
                 "ATTENTION_FACTOR:BETA_FAST:BETA_SLOW:TRUNCATE (TRUNCATE 0 or 1)", text);
        return -1;
    }
    RopeScaling r = yarn_defaults(v[0], (int)v[1]);
    if (n == 6) {
        r.attention_factor = v[2];
        r.beta_fast = (float)v[3];
        r.beta_slow = (float)v[4];
        r.truncate = (int)v[5];
    }
    return store_checked(text, &r, sc, err, errlen);
}

int rope_scaling_parse(const char *text, RopeScaling *sc, char *err, size_t errlen) {
    RopeScaling r = {0};
    if (!strncmp(text, "longrope:", 9)) return parse_longrope(text, text + 9, sc, err, errlen);
    if (!strncmp(text, "yarn:", 5)) return parse_yarn(text, text + 5, sc, err, errlen);
    double v[4] = {0};
    int want = 0;
    const char *p = text;
    if (!strcmp(text, "none") || !strcmp(text, "default")) {
        *sc = r;
        return 0;
    }
    const char *form = NULL;   // what the numbers after the name must be
    if (!strncmp(text, "linear:", 7)) r.type = ROPE_LINEAR, want = 1, p += 7, form = "linear:FACTOR";
    else if (!strncmp(text, "llama3:", 7))
        r.type = ROPE_LLAMA3, want = 4, p += 7, form = "llama3:FACTOR:LOW:HIGH:ORIGINAL_POSITIONS (four numbers)";
    else if (!strncmp(text, "dynamic:", 8))
        r.type = ROPE_DYNAMIC, want = 2, p += 8, form = "dynamic:FACTOR:MAX_POSITIONS (two numbers)";
    else {
        snprintf(err, errlen, "'%.200s': expected none, linear:FACTOR, llama3:FACTOR:LOW:HIGH:ORIGINAL_POSITIONS, "
                 "longrope:ORIGINAL_POSITIONS:ATTENTION_FACTOR:SHORT,...:LONG,..., "
                 "yarn:FACTOR:ORIGINAL_POSITIONS[:...] or dynamic:FACTOR:MAX_POSITIONS", text);
        return -1;
    }
    for (int i = 0; i < want; i++)
        if (scaling_number(&p, &v[i]) || (i == want - 1) != (*p == '\0')) {
            snprintf(err, errlen, "'%s': expected %s", text, form);
            return -1;
        }
    r.factor = (float)v[0];
    double positions = r.type == ROPE_DYNAMIC ? v[1] : v[3];   // llama3's original context, dynamic's M
    if (r.type == ROPE_LLAMA3) r.low_freq_factor = (float)v[1], r.high_freq_factor = (float)v[2];
    if (r.type != ROPE_LINEAR && (positions != floor(positions) || positions < 1 || positions > 2147483647.0)) {
        snprintf(err, errlen, "'%s': the %s positions %g are not a positive integer", text,
                 r.type == ROPE_DYNAMIC ? "maximum" : "original", positions);
        return -1;
    }
    r.original_max_positions = (int)positions;
    return store_checked(text, &r, sc, err, errlen);
}
