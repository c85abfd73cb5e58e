// Two open-addressing hash tables that hand out dense ids (0, 1, 2, ... in insertion order), so
// callers keep their per-entry data in plain arrays indexed by id:
//   StrTable  - byte strings (pre-tokens), interned into one pool;
//   PairTable - pairs of token ids (a, b), the BPE symbol pairs and merges.
// Ids never depend on the hash function, so everything built on them is deterministic.
#ifndef CTRON_HASHTAB_H
#define CTRON_HASHTAB_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *pool;            // the strings back to back
    size_t pool_len, pool_cap;
    size_t *off;              // id -> offset in pool
    uint32_t *len;            // id -> length
    uint64_t *hash;           // id -> hash, kept for growing
    int32_t *slot;            // open addressing, -1 = empty, capacity a power of two
    size_t n_slots;
    int32_t n, cap;           // ids in use, capacity of the per-id arrays
} StrTable;

void strtab_init(StrTable *t);
void strtab_free(StrTable *t);
// Id of s[0..len), adding it when absent (*added says which, if non-NULL).
int32_t strtab_intern(StrTable *t, const uint8_t *s, size_t len, int *added);
int32_t strtab_find(const StrTable *t, const uint8_t *s, size_t len);   // id, or -1
static inline const uint8_t *strtab_str(const StrTable *t, int32_t id) { return t->pool + t->off[id]; }

typedef struct {
    int32_t *a, *b;           // id -> pair
    int32_t *slot;
    size_t n_slots;
    int32_t n, cap;
} PairTable;

void pairtab_init(PairTable *t);
void pairtab_free(PairTable *t);
int32_t pairtab_find(const PairTable *t, int32_t a, int32_t b);   // id, or -1
int32_t pairtab_intern(PairTable *t, int32_t a, int32_t b, int *added);
#endif
