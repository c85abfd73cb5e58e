#include "tokenizer/hashtab.h"
#include <string.h>
#include "util/common.h"

static void *grow(void *p, size_t bytes) {
    void *q = realloc(p, bytes);
    if (!q) ctron_fatal("out of memory growing a hash table to %zu bytes", bytes);
    return q;
}

static int32_t *new_slots(size_t n) {
    int32_t *s = grow(NULL, n * sizeof *s);
    memset(s, 0xff, n * sizeof *s);   // all -1
    return s;
}

// FNV-1a over the bytes, then a final avalanche so that the low bits are usable as the index.
static uint64_t hash_bytes(const uint8_t *s, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ s[i]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static uint64_t hash_pair(int32_t a, int32_t b) {
    uint64_t h = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

void strtab_init(StrTable *t) {
    memset(t, 0, sizeof *t);
    t->n_slots = 1024;
    t->slot = new_slots(t->n_slots);
}

void strtab_free(StrTable *t) {
    free(t->pool);
    free(t->off);
    free(t->len);
    free(t->hash);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

static void strtab_rehash(StrTable *t) {
    free(t->slot);
    t->n_slots *= 2;
    t->slot = new_slots(t->n_slots);
    size_t mask = t->n_slots - 1;
    for (int32_t id = 0; id < t->n; id++) {
        size_t i = t->hash[id] & mask;
        while (t->slot[i] >= 0) i = (i + 1) & mask;
        t->slot[i] = id;
    }
}

int32_t strtab_find(const StrTable *t, const uint8_t *s, size_t len) {
    uint64_t h = hash_bytes(s, len);
    size_t mask = t->n_slots - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        int32_t id = t->slot[i];
        if (id < 0) return -1;
        if (t->hash[id] == h && t->len[id] == len && (len == 0 || memcmp(t->pool + t->off[id], s, len) == 0)) return id;
    }
}

int32_t strtab_intern(StrTable *t, const uint8_t *s, size_t len, int *added) {
    if (len > INT32_MAX) ctron_fatal("a pre-token of %zu bytes is longer than the tokenizer supports (2^31-1)", len);
    uint64_t h = hash_bytes(s, len);
    size_t mask = t->n_slots - 1, i = h & mask;
    for (int32_t id; (id = t->slot[i]) >= 0; i = (i + 1) & mask)
        if (t->hash[id] == h && t->len[id] == len && (len == 0 || memcmp(t->pool + t->off[id], s, len) == 0)) {
            if (added) *added = 0;
            return id;
        }
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->off = grow(t->off, (size_t)t->cap * sizeof *t->off);
        t->len = grow(t->len, (size_t)t->cap * sizeof *t->len);
        t->hash = grow(t->hash, (size_t)t->cap * sizeof *t->hash);
    }
    if (t->pool_len + len > t->pool_cap) {
        while (t->pool_len + len > t->pool_cap) t->pool_cap = t->pool_cap ? 2 * t->pool_cap : 65536;
        t->pool = grow(t->pool, t->pool_cap);
    }
    int32_t id = t->n++;
    if (len) memcpy(t->pool + t->pool_len, s, len);
    t->off[id] = t->pool_len;
    t->len[id] = (uint32_t)len;
    t->hash[id] = h;
    t->pool_len += len;
    t->slot[i] = id;
    if ((size_t)t->n * 2 > t->n_slots) strtab_rehash(t);   // load factor <= 1/2
    if (added) *added = 1;
    return id;
}

void pairtab_init(PairTable *t) {
    memset(t, 0, sizeof *t);
    t->n_slots = 1024;
    t->slot = new_slots(t->n_slots);
}

void pairtab_free(PairTable *t) {
    free(t->a);
    free(t->b);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

int32_t pairtab_find(const PairTable *t, int32_t a, int32_t b) {
    size_t mask = t->n_slots - 1;
    for (size_t i = hash_pair(a, b) & mask;; i = (i + 1) & mask) {
        int32_t id = t->slot[i];
        if (id < 0) return -1;
        if (t->a[id] == a && t->b[id] == b) return id;
    }
}

int32_t pairtab_intern(PairTable *t, int32_t a, int32_t b, int *added) {
    size_t mask = t->n_slots - 1, i = hash_pair(a, b) & mask;
    for (int32_t id; (id = t->slot[i]) >= 0; i = (i + 1) & mask)
        if (t->a[id] == a && t->b[id] == b) {
            if (added) *added = 0;
            return id;
        }
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->a = grow(t->a, (size_t)t->cap * sizeof *t->a);
        t->b = grow(t->b, (size_t)t->cap * sizeof *t->b);
    }
    int32_t id = t->n++;
    t->a[id] = a;
    t->b[id] = b;
    t->slot[i] = id;
    if ((size_t)t->n * 2 > t->n_slots) {
        free(t->slot);
        t->n_slots *= 2;
        t->slot = new_slots(t->n_slots);
        size_t m = t->n_slots - 1;
        for (int32_t k = 0; k < t->n; k++) {
            size_t j = hash_pair(t->a[k], t->b[k]) & m;
            while (t->slot[j] >= 0) j = (j + 1) & m;
            t->slot[j] = k;
        }
    }
    if (added) *added = 1;
    return id;
}
