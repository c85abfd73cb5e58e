// Human-readable ledger: measured bytes next to the analytic prediction, per name.
#ifndef CTRON_LEDGER_REPORT_H
#define CTRON_LEDGER_REPORT_H
#include <stdio.h>
#include "memory/ledger.h"
#include "memory/memory_model.h"

// Prints what each name keeps (summed over layers, and layer 0 alone) at the end of the forward,
// and the step's peak; returns the number of cells where measured != predicted.
int ledger_print_report(FILE *f, const Ledger *lg, const ActShape *sh, const MemoryPolicy *p);
// "12.3 MiB"
const char *format_bytes(double bytes, char *buf, size_t len);
// The offload pool's ledger (--offload) against the model: bytes per name, the pool at the end of the
// forward; where the pool is, what moved and how long the step waited for it.
int ledger_print_offload(FILE *f, const Ledger *pool, const ActShape *sh, const MemoryPolicy *p, const char *where,
                         double stored, double loaded, double wait_s);
// MEMO's host pool (--memo): the swapped token slices of every memo layer, per name, against the model.
int ledger_print_memo(FILE *f, const Ledger *pool, const ActShape *sh, const MemoryPolicy *p, const char *where,
                      double stored, double loaded, double wait_s);
#endif
